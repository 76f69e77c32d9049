"""The OpenAPI document against the service it describes: schemathesis, with every check it
has, generates requests from ``/openapi.json`` (valid and invalid ones, undeclared methods,
sequences that lease, use and delete sandboxes) and sends them to a real service on the local
backend; any finding (a 500, a valid request refused, an invalid one accepted, an answer or
status the document does not list, a 405 without ``Allow``...) fails the test with
schemathesis' report.

The token may hold two leases of a pool of four sandboxes, so the generated leases never
exhaust the pool's capacity: a 503 there would be the service saying so, which the
``not_a_server_error`` check counts as a finding. One worker sends one request at a time: what
is under test is the contract, and races between requests on one lease are the chaos tests'.
The seed is fixed, so a run is reproducible; run ``st run`` with other seeds (``--seed``) to
hunt further.
"""

from __future__ import annotations

import re
import sys

import aiohttp
import anyio
import pytest

from gem_sandbox.service import TokenPolicy
from tests.service_fixtures import auth, serving

pytestmark = pytest.mark.anyio

FUZZER = TokenPolicy(name="fuzzer", secret="fuzzer-secret", max_leases=2)
SEED = "20261204"
EXAMPLES = "50"  # per operation and phase: about 20-30 s on two cores


async def test_schemathesis_with_every_check_finds_nothing() -> None:
    pytest.importorskip("schemathesis", reason="schemathesis is in the test extra (pip install -e '.[test]')")
    async with serving("local", tokens=(FUZZER,)) as service:
        command = [
            sys.executable, "-m", "schemathesis.cli", "run", f"{service.url}/openapi.json",
            "--checks", "all",
            "--header", f"Authorization: Bearer {FUZZER.secret}",
            "--max-examples", EXAMPLES,
            "--seed", SEED,
            "--workers", "1",
            "--request-timeout", "60",
            "--generation-database", "none",
            "--no-color",
        ]  # fmt: skip
        finished = await anyio.run_process(command, check=False)
    report = finished.stdout.decode(errors="replace") + finished.stderr.decode(errors="replace")
    assert finished.returncode == 0, report
    tested = re.search(r"(\d+) generated, \1 passed", report)
    assert tested is not None and int(tested[1]) > 0, report


async def test_the_documents_languages_are_those_the_sandboxes_run() -> None:
    async with serving("local", tokens=(FUZZER,)) as service, aiohttp.ClientSession(service.url) as http:
        async with http.get("/openapi.json") as response:
            schemas = (await response.json())["components"]["schemas"]
        async with http.post("/v1/sandboxes", headers=auth(FUZZER)) as response:
            languages = (await response.json())["languages"]
    assert schemas["RunBody"]["properties"]["language"]["enum"] == sorted(languages)
    assert schemas["RunCodeRequest"]["properties"]["language"]["enum"] == sorted(languages)
