"""The search tool and its backends: embedded FTS5 index, Search-R1 server and client, CLI."""

from __future__ import annotations

import argparse
import io
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import anyio
import pytest
from aiohttp import web

from gem_sandbox.runtime import Runtime
from gem_sandbox.search import SearchIndex, build_index, fts_query
from gem_sandbox.search.cli import add_search_commands
from gem_sandbox.sync import resolve_runtime, run_sync
from gem_sandbox.search.server import MAX_REQUEST_BYTES, serve_forever, serving
from gem_sandbox.tools.search_tool import SearchTool
from gem_sandbox.tools.tool_env_wrapper import ToolEnvWrapper
from tests.helpers import CountdownEnv

DOCS = {
    "photosynthesis": "Photosynthesis\nPlants turn sunlight, water and carbon dioxide into sugar using chlorophyll.",
    "volcano": "Volcano\nA volcano erupts when magma rises through the crust.\nLava cools into basalt.",
    "eiffel": "Eiffel Tower\nThe wrought-iron lattice tower in Paris was finished in 1889.",
    "paris": "Paris\nParis is the capital of France, on the Seine.",
    "python": "Python (programming language)\nPython is a programming language created by Guido van Rossum.",
    "mitochondria": "Mitochondrion\nThe mitochondria are the powerhouse of the cell, making ATP.",
    "everest": "Mount Everest\nEverest is the highest mountain above sea level, in the Himalayas.",
    "jupiter": "Jupiter\nJupiter is the largest planet in the Solar System, a gas giant.",
    "beethoven": "Ludwig van Beethoven\nA German composer who wrote nine symphonies despite deafness.",
    "amazon": "Amazon River\nThe Amazon carries more water than any other river in South America.",
    "dna": "DNA\nDeoxyribonucleic acid carries genetic instructions in a double helix.",
    "chess": "Chess\nChess is a board game for two players on a checkered board of 64 squares.",
    "coffee": "Coffee\nCoffee is brewed from roasted beans of the Coffea plant.",
    "tokyo": "Tokyo\nTokyo is the capital of Japan and its most populous city.",
    "penicillin": "Penicillin\nAlexander Fleming discovered penicillin, the first antibiotic, in 1928.",
    "moon": "Apollo 11\nApollo 11 landed the first humans on the Moon in 1969.",
    "shakespeare": "William Shakespeare\nAn English playwright who wrote Hamlet and Macbeth.",
    "sahara": "Sahara\nThe Sahara is the largest hot desert, in North Africa.",
    "bitcoin": "Bitcoin\nBitcoin is a decentralized digital currency using a blockchain.",
    "cafe": "Café\nA café serves coffee and light meals; the word is French.",
}


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    """A runtime for the HTTP tools: its sandbox pool is never opened by a search."""
    async with Runtime() as rt:
        yield rt
        assert rt.statistics().launched == 0


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"id": doc_id, "contents": contents}) for doc_id, contents in DOCS.items()]
    path.write_text("\n".join(lines[:10]) + "\n\n" + "\n".join(lines[10:]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def index(corpus: Path, tmp_path: Path):
    build_index(corpus, tmp_path / "index.db")
    with SearchIndex(tmp_path / "index.db") as idx:
        yield idx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def search(query: str) -> str:
    return f"<think>I need to look this up.</think><search>{query}</search>"


# --- the embedded index -------------------------------------------------------------------


def test_a_query_finds_its_document_through_case_punctuation_and_stemming(index: SearchIndex):
    assert index.search("photosynthesis chlorophyll", 3)[0].id == "photosynthesis"
    assert index.search("WHO DISCOVERED PENICILLIN?!", 3)[0].id == "penicillin"
    assert index.search("volcanoes erupting", 3)[0].id == "volcano"  # porter: erupts ~ erupting
    assert index.search("cafe", 1)[0].id == "cafe"  # diacritics folded
    top = index.search("highest mountain", 1)[0]
    assert (top.title, top.score > 0) == ("Mount Everest", True)


def test_topk_is_respected_and_scores_rank_best_first(index: SearchIndex):
    for k in (1, 2, 5):
        assert len(index.search("the capital city of", k)) == k
    scores = [hit.score for hit in index.search("the capital city of", 5)]
    assert scores == sorted(scores, reverse=True)
    assert index.search("zzzunknownword", 3) == []


@pytest.mark.parametrize(
    "query", ['"foo AND (bar', "title:paris", "NEAR(a b)", "*", "AND OR NOT", '""', "^chess -", "a'b\"c)(", "", "¿?"]
)
def test_fts5_syntax_in_queries_is_harmless(index: SearchIndex, query: str):
    assert isinstance(index.search(query, 3), list)


def test_queries_are_quoted_terms_ored_together():
    assert fts_query('Paris AND "Eiffel (tower') == '"paris" OR "and" OR "eiffel" OR "tower"'
    assert fts_query("?! --") is None


def test_rebuild_is_idempotent_and_replaces_the_index(corpus: Path, tmp_path: Path):
    db = tmp_path / "index.db"
    assert build_index(corpus, db) == len(DOCS)
    assert build_index(corpus, db) == len(DOCS)
    corpus.write_text(json.dumps({"id": "only", "contents": "Only\nA lone chess document."}) + "\n")
    assert build_index(corpus, db) == 1
    with SearchIndex(db) as idx:
        assert [hit.id for hit in idx.search("chess", 5)] == ["only"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "index.db"]


def test_a_bad_corpus_line_is_named_and_leaves_no_index(tmp_path: Path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": 1, "contents": "Fine\\ntext"}\n{"id": 2, "text": "no contents"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        build_index(corpus, tmp_path / "index.db")
    assert not (tmp_path / "index.db").exists()
    with pytest.raises(FileNotFoundError):
        SearchIndex(tmp_path / "index.db")


# --- the tool -----------------------------------------------------------------------------


def test_parse_takes_the_first_complete_block_and_cuts_there():
    tool = SearchTool(search_url="http://127.0.0.1:1/retrieve")
    action = "<think>hm</think><search> first\nquery </search> then <search>second</search>"
    call = tool.parse(action)
    assert call is not None
    assert call.arguments == {"query": "first\nquery"}
    assert call.parsed_action == "<think>hm</think><search> first\nquery </search>"
    assert call.end == len(call.parsed_action)
    assert tool.parse("<search>unterminated") is None
    assert tool.parse("no tool call here") is None


def test_schema_and_instruction_follow_gem():
    tool = SearchTool()
    function = tool.schema()["function"]
    assert function["name"] == "search" and function["parameters"]["required"] == ["query"]
    assert tool.tool_type == "search"
    instruction = tool.instruction_string()
    assert instruction.startswith("You have access to a search engine to help answer questions.\n\n")
    assert "  <search> your query here </search>\n" in instruction
    assert instruction.endswith("  <answer> your answer here </answer>")


@pytest.mark.anyio
async def test_observation_is_gems_passage_format(index: SearchIndex):
    tool = SearchTool(topk=2, index=index)
    valid, error, observation, parsed = await tool.aexecute_action(search("volcano magma lava") + " trailing")
    assert (valid, error, parsed) == (True, False, search("volcano magma lava"))
    assert observation == (
        "\n\n<information>"
        "Doc 1(Title: Volcano) A volcano erupts when magma rises through the crust.\nLava cools into basalt.\n"
        "</information>\n\n"
    )
    _, _, observation, _ = await tool.aexecute_action(search("Eiffel Tower Paris"))
    assert observation == (
        "\n\n<information>"
        "Doc 1(Title: Eiffel Tower) The wrought-iron lattice tower in Paris was finished in 1889.\n"
        "Doc 2(Title: Paris) Paris is the capital of France, on the Seine.\n"
        "</information>\n\n"
    )


@pytest.mark.anyio
async def test_an_empty_query_or_no_backend_is_an_error_observation(monkeypatch, index: SearchIndex):
    valid, error, observation, _ = await SearchTool(index=index).aexecute_action(search("  "))
    assert (valid, error) == (True, True)
    assert observation == "\n\n<information>[SearchTool Error: empty query]</information>\n\n"
    monkeypatch.delenv("SEARCH_URL", raising=False)
    _, error, observation, _ = await SearchTool().aexecute_action(search("paris"))
    assert error and "[SearchTool Error: no search backend" in observation


@pytest.mark.anyio
async def test_search_url_defaults_to_the_environment_as_in_gem(monkeypatch, index: SearchIndex, runtime: Runtime):
    async with serving(index, port=0) as url:
        monkeypatch.setenv("SEARCH_URL", f"{url}/retrieve")
        tool = SearchTool(topk=1, runtime=runtime)
        _, error, observation, _ = await tool.aexecute_action(search("Guido van Rossum"))
        await tool.aclose()
    assert not error and "Doc 1(Title: Python (programming language))" in observation


@pytest.mark.anyio
async def test_the_tool_opens_an_index_from_a_path(corpus: Path, tmp_path: Path):
    build_index(corpus, tmp_path / "index.db")
    tool = SearchTool(topk=1, index=tmp_path / "index.db")
    _, error, observation, _ = await tool.aexecute_action(search("who wrote Hamlet"))
    await tool.aclose()
    assert not error and "Doc 1(Title: William Shakespeare)" in observation


# --- the server and the client over real HTTP ----------------------------------------------


@pytest.mark.anyio
async def test_the_server_speaks_the_search_r1_protocol(index: SearchIndex):
    async with serving(index, port=0) as url, aiohttp.ClientSession() as http:
        async with http.get(f"{url}/healthz") as response:
            assert (response.status, await response.json()) == (200, {"status": "ok"})

        request = {"queries": ["largest planet", "capital of Japan"], "topk": 2, "return_scores": True}
        async with http.post(f"{url}/retrieve", json=request) as response:
            result = (await response.json())["result"]
        assert [len(hits) for hits in result] == [2, 2]
        top = result[0][0]
        assert top["document"] == {
            "id": "jupiter",
            "title": "Jupiter",
            "text": "Jupiter is the largest planet in the Solar System, a gas giant.",
            "contents": DOCS["jupiter"],
        }
        assert isinstance(top["score"], float) and result[1][0]["document"]["id"] == "tokyo"

        async with http.post(f"{url}/retrieve", json={"queries": ["the chess board"]}) as response:
            plain = (await response.json())["result"]  # no scores: bare documents, default topk
        assert plain[0][0]["id"] == "chess" and len(plain[0]) == 3

        for body, status in [
            (b"{not json", 400),
            (b'{"queries": "paris"}', 400),
            (b'{"queries": ["paris"], "topk": -1}', 400),
            (b"[]", 400),
            (b" " * (MAX_REQUEST_BYTES + 1), 413),
        ]:
            async with http.post(f"{url}/retrieve", data=io.BytesIO(body)) as response:
                assert response.status == status, body[:40]
                if status == 400:
                    assert "error" in await response.json()


@pytest.mark.anyio
async def test_the_tool_over_http_answers_as_the_embedded_index_does(index: SearchIndex, runtime: Runtime):
    embedded = SearchTool(topk=3, index=index)
    async with serving(index, port=0) as url:
        remote = SearchTool(topk=3, search_url=f"{url}/retrieve", runtime=runtime)
        for query in ("first humans on the Moon", "antibiotic discovered by Fleming", "Paris"):
            over_http = await remote.aexecute_action(search(query))
            assert over_http == await embedded.aexecute_action(search(query))
            assert over_http[1] is False and "Doc 1(" in over_http[2]
        await remote.aclose()


def test_the_sync_face_searches_on_the_process_default_runtime_without_a_sandbox(index: SearchIndex):
    """GEM-style sync code passes no runtime: the default's HTTP session serves it, and a
    runtime that only serves HTTP tools never opens a sandbox pool."""
    with anyio.from_thread.start_blocking_portal() as server_thread:
        with server_thread.wrap_async_context_manager(serving(index, port=0)) as url:
            tool = SearchTool(topk=1, search_url=f"{url}/retrieve")
            first = tool.execute_action(search("board game"))
            second = tool.execute_action(search("board game"))
    assert first == second and first[2].startswith("\n\n<information>Doc 1(Title: Chess)")
    assert run_sync(resolve_runtime, None).statistics().launched == 0


@pytest.mark.anyio
async def test_a_server_that_is_down_is_an_error_observation(runtime: Runtime):
    tool = SearchTool(search_url=f"http://127.0.0.1:{free_port()}/retrieve", timeout=2, runtime=runtime)
    valid, error, observation, _ = await tool.aexecute_action(search("paris"))
    await tool.aclose()
    assert valid and error
    assert observation.startswith("\n\n<information>[SearchTool Error: ")


async def _fake_server(handler) -> web.AppRunner:
    app = web.Application()
    app.router.add_post("/retrieve", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.mark.anyio
async def test_a_slow_server_times_out_into_an_error_observation(runtime: Runtime):
    release = anyio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"result": [[]]})

    runner = await _fake_server(slow)
    port = runner.addresses[0][1]
    tool = SearchTool(search_url=f"http://127.0.0.1:{port}/retrieve", timeout=0.3, runtime=runtime)
    start = time.monotonic()
    _, error, observation, _ = await tool.aexecute_action(search("paris"))
    elapsed = time.monotonic() - start
    release.set()
    await tool.aclose()
    await runner.cleanup()
    assert error and "[SearchTool Error: no answer from" in observation and "within 0.3s" in observation
    assert 0.25 < elapsed < 1.5


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        {"text": "<html>oops</html>"},
        {"text": '{"results": []}'},
        {"text": '{"result": [[{"document": {"title": "no contents"}}]]}'},
        {"text": '{"result": "nope"}'},
        {"text": '{"result": [[{"document": {"contents": "T\\nx"}, "score": "high"}]]}'},
        {"text": '{"error": "boom"}', "status": 500},
    ],
)
async def test_a_server_answering_garbage_is_an_error_observation(reply: dict, runtime: Runtime):
    async def garbage(request: web.Request) -> web.Response:
        return web.Response(**reply)

    runner = await _fake_server(garbage)
    tool = SearchTool(search_url=f"http://127.0.0.1:{runner.addresses[0][1]}/retrieve", runtime=runtime)
    valid, error, observation, _ = await tool.aexecute_action(search("paris"))
    await tool.aclose()
    await runner.cleanup()
    assert valid and error and "[SearchTool Error: " in observation


# --- inside GEM's tool wrapper ------------------------------------------------------------


@pytest.mark.anyio
async def test_the_tool_in_a_wrapper_gives_gems_info_keys_and_reward(index: SearchIndex):
    # GEM's "search_tool" factory entry
    env = ToolEnvWrapper(CountdownEnv(length=2), tools=[SearchTool(topk=3, timeout=5, index=index)],
                         tool_reward=0.3, tool_success_reward=0.0, max_tool_uses=5)  # fmt: skip
    obs, info = await env.areset(seed=0)
    assert obs.endswith(SearchTool().instruction_string())
    assert info["tool_use_counter"] == 0 and info["use_tool"] is False

    obs, reward, terminated, truncated, info = await env.astep(search("largest hot desert") + "<answer>x</answer>")
    assert obs.startswith("\n\n<information>Doc 1(Title: Sahara)")
    assert (reward, terminated, truncated) == (0.3, False, False)
    assert info == {
        "parsed_action": search("largest hot desert"),
        "tool_type": "search",
        "use_tool": True,
        "tool_use_counter": 1,
        "tool_success_counter": 1,
    }

    obs, reward, terminated, _, info = await env.astep("<answer>Sahara</answer>")
    assert (obs, reward, terminated, info["use_tool"]) == ("left 1", 0.0, False, True)  # GEM sets it on env steps too
    await env.astep("done")
    _, info = await env.areset()
    assert (info["prev_ep_tool_use_counter"], info["prev_ep_tool_success_counter"]) == (1, 1)


# --- the CLI ------------------------------------------------------------------------------


def cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gem-sandbox")
    add_search_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


@pytest.mark.anyio
async def test_search_index_builds_a_db_that_search_serve_serves(
    corpus: Path, tmp_path: Path, capsys, runtime: Runtime
):
    db = tmp_path / "cli.db"
    args = cli(["search", "index", str(corpus), "--db", str(db)])
    assert args.func(args) == 0
    assert f"indexed {len(DOCS)} documents" in capsys.readouterr().out

    args = cli(["search", "serve", "--db", str(db), "--port", str(free_port())])
    assert args.host == "127.0.0.1"
    tool = SearchTool(topk=1, search_url=f"http://127.0.0.1:{args.port}/retrieve", timeout=2, runtime=runtime)
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_forever, args.db, args.host, args.port)  # what args.func runs, on this loop
        with anyio.fail_after(5):
            while "retrieval server" not in capsys.readouterr().out:
                await anyio.sleep(0.01)
        _, error, observation, _ = await tool.aexecute_action(search("double helix genetic"))
        tg.cancel_scope.cancel()
    await tool.aclose()
    assert not error and observation.startswith("\n\n<information>Doc 1(Title: DNA) ")
