"""Runs a Terminal-Bench task's pytest files and reports each test's outcome to the harness.

Sandbox code, started by the verifier as ``python3 -I runner.py`` (no work dir, user site or
``PYTHON*`` variable on its path). It first makes itself undumpable, so the programs the tests
run (the model's, same uid, exec'd after this) cannot read or write its memory or reach its
file descriptors through ``/proc`` or ptrace. pytest gets the harness's empty ini, the tests'
own directory as its root and conftest boundary, and no plugins from the environment or the
cache: nothing in the work dir changes what is collected or how it is reported. The report
goes to the harness's ``pytest.json`` fifo, never to stdout, which the tests' programs share,
and starts with a token only this process and the host know, so no other writer can make the
report its own (by writing a prefix the real report completes, say).
"""

import ctypes
import os
import sys

PR_SET_DUMPABLE = 4
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
# The host's secret for this run, which starts the report: out of the environment before any
# test runs, so no program a test starts inherits it (and /proc shows it to no one else).
TOKEN = os.environ.pop("VERIFIER_TOKEN", "")

import json  # noqa: E402

import pytest  # noqa: E402

TESTS = "/tmp/gem-sandbox-tests"
REPORT = "/tmp/gem-sandbox-logs/verifier/pytest.json"
INI = "/tmp/gem-sandbox-verifier/pytest.ini"


class Outcomes:
    """Each test's outcome: ``passed`` only if its call passed and its setup and teardown did
    not fail; a module that fails to import is one ``error`` entry."""

    def __init__(self):
        self.tests = {}

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.tests[report.nodeid] = "failed" if report.when == "call" else "error"
        elif report.skipped:
            self.tests.setdefault(report.nodeid, "skipped")
        elif report.when == "call":
            self.tests.setdefault(report.nodeid, "passed")

    def pytest_collectreport(self, report):
        if report.failed:
            self.tests[report.nodeid or "<collection>"] = "error"


def main():
    outcomes = Outcomes()
    args = ["-c", INI, "--rootdir", TESTS, "--confcutdir", TESTS, "-p", "no:cacheprovider", "-q", TESTS]
    code = pytest.main(args, plugins=[outcomes])
    with open(REPORT, "w") as report:
        report.write(TOKEN + json.dumps({"exit": int(code), "tests": outcomes.tests}))
    return int(code)


sys.exit(main())
