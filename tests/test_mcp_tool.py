"""MCPTool against the real demo server (gem_sandbox.tools.mcp_demo_server), over stdio and over
streamable HTTP on 127.0.0.1: listing, GEM's and JSON calls, every error observation, the
timeout, a server that dies, the session's lifetime across tasks and loops, and an episode.

Starting a server costs seconds (importing the SDK), so one stdio tool serves the module's sync
tests and one HTTP server its HTTP tests; only tests about a server's death or the end of a
session start their own.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

pytest.importorskip("mcp")

import gem_sandbox
from gem_sandbox.bridge import run_sync
from gem_sandbox.tools.base import ToolOutput
from gem_sandbox.tools.mcp_tool import MCPConnectionError, MCPErrorKind, MCPTool
from gem_sandbox.tools.mcp_demo_server import URL_LINE
from gem_sandbox.wrappers import ToolEnvWrapper

SERVER = ["-m", "gem_sandbox.tools.mcp_demo_server"]
DEMO_TOOLS = {"add", "reverse", "lookup", "divide", "fail", "sleep", "crash", "pid", "getenv"}
START_TIMEOUT = 60.0  # a server's start, on a loaded machine


def gem_call(name: str, arguments: dict | str | None = None) -> str:
    """A call in GEM's format."""
    args = "" if arguments is None else arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f"<tool_call>\n<tool_name>{name}</tool_name>\n<arguments>\n{args}\n</arguments>\n</tool_call>"


def json_call(name: str, arguments: dict) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


def execute(tool: MCPTool, action: str) -> ToolOutput:
    """The sync face's run of the call in ``action``, with its details."""
    call = tool.parse(action)
    assert call is not None, action
    return run_sync(tool.aexecute, call)


async def aexecute(tool: MCPTool, action: str) -> ToolOutput:
    call = tool.parse(action)
    assert call is not None, action
    return await tool.aexecute(call)


def body(output: ToolOutput) -> str:
    """The text inside GEM's <tool_response> block."""
    text = output.observation
    assert text.startswith("\n<tool_response>\n") and text.endswith("\n</tool_response>\n"), text
    return text.removeprefix("\n<tool_response>\n").removesuffix("\n</tool_response>\n")


def server_pid(output: ToolOutput) -> int:
    assert not output.error, output.observation
    return int(body(output))


def gone(pid: int, timeout: float = 15.0) -> bool:
    """Whether process ``pid`` has exited and been reaped within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def stdio_tool(**options) -> MCPTool:
    return MCPTool(command=sys.executable, args=SERVER, connect_timeout=START_TIMEOUT, **options)


@contextlib.contextmanager
def http_server(log_dir: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The demo server over streamable HTTP on a free 127.0.0.1 port, answering; stopped at exit."""
    with open(log_dir / "mcp-http-server.log", "w+") as log:
        proc = subprocess.Popen(
            [sys.executable, *SERVER, "--transport", "streamable-http", "--host", "127.0.0.1", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
            line = proc.stdout.readline() if ready else ""
            if not line.startswith(URL_LINE):
                log.seek(0)
                pytest.fail(f"the HTTP server did not start: {line!r}\n{log.read()}")
            url = line.split()[1]
            wait_answering(url, proc)
            yield proc, url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def wait_answering(url: str, proc: subprocess.Popen[str]) -> None:
    """Until the server at ``url`` answers HTTP (any response will do)."""
    parts = urlsplit(url)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
            conn.request("GET", parts.path)
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def tool() -> Iterator[MCPTool]:
    """One stdio server for the sync tests; its session lives on the sync faces' loop."""
    tool = stdio_tool(timeout=1.0, env={"MCP_DEMO_GREETING": "hello"})
    yield tool
    pid = server_pid(execute(tool, gem_call("pid")))
    tool.close()
    assert gone(pid), "closing the tool left its server running"


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with http_server(tmp_path_factory.mktemp("mcp")) as (_, url):
        yield url


# -- listing --------------------------------------------------------------------------------


def test_the_servers_tools_become_one_function_schema_each(tool: MCPTool):
    schemas = {schema["function"]["name"]: schema for schema in tool.schemas()}
    assert set(schemas) == DEMO_TOOLS
    add = schemas["add"]
    assert add["type"] == "function"
    assert add["function"]["description"] == "Add two integers."
    parameters = add["function"]["parameters"]
    assert parameters["type"] == "object" and parameters["required"] == ["a", "b"]
    assert parameters["properties"]["a"]["type"] == "integer"
    dispatch = tool.schema()["function"]  # what a one-schema-per-tool wrapper sees
    assert dispatch["name"] == "mcp" and set(dispatch["parameters"]["properties"]["name"]["enum"]) == DEMO_TOOLS


def test_the_instructions_show_the_call_format_and_every_tool(tool: MCPTool):
    text = tool.instruction_string()
    assert "<tool_name>" in text and "<arguments>" in text and "<tool_response>" in text
    listed = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    assert {json.loads(line)["function"]["name"] for line in listed} == DEMO_TOOLS


# -- parsing --------------------------------------------------------------------------------


def test_calls_are_found_in_gems_format_and_in_json(tool: MCPTool):
    action = f"Let me add. {gem_call('add', {'a': 2, 'b': 3})} and more text"
    call = tool.parse(action)
    assert call is not None and call.tool == "mcp"
    assert call.arguments["name"] == "add" and json.loads(call.arguments["arguments"]) == {"a": 2, "b": 3}
    assert call.parsed_action == action.removesuffix(" and more text")

    call = tool.parse(json_call("reverse", {"text": "abc"}))
    assert call is not None and call.arguments == {"name": "reverse", "arguments": {"text": "abc"}}
    dispatched = tool.parse(json_call("mcp", {"name": "reverse", "arguments": {"text": "abc"}}))
    assert dispatched is not None and dispatched.arguments == call.arguments


def test_only_mcp_calls_are_claimed_and_the_first_one_wins(tool: MCPTool):
    assert tool.parse("no call here \\boxed{4}") is None
    assert tool.parse(json_call("python", {"code": "print(1)"})) is None  # another tool's JSON call
    both = json_call("reverse", {"text": "ab"}) + gem_call("add", {"a": 1, "b": 1})
    call = tool.parse(both)
    assert call is not None and call.arguments["name"] == "reverse"


# -- results --------------------------------------------------------------------------------


def test_gems_format_returns_gems_observation(tool: MCPTool):
    is_valid, has_error, observation, parsed = tool.execute_action(gem_call("add", {"a": 2, "b": 3}))
    assert (is_valid, has_error, observation) == (True, False, "\n<tool_response>\n5\n</tool_response>\n")
    assert parsed.endswith("</tool_call>")


def test_json_calls_return_the_same_results(tool: MCPTool):
    assert body(execute(tool, json_call("reverse", {"text": "stressed"}))) == "desserts"
    assert body(execute(tool, json_call("lookup", {"country": "Kenya"}))) == "Nairobi"
    output = execute(tool, json_call("divide", {"a": 17, "b": 5}))
    assert json.loads(body(output)) == {"quotient": 3, "remainder": 2}
    assert output.details["structured_content"] == {"quotient": 3, "remainder": 2}
    assert output.details["status"] == "ok" and "error" not in output.details


def test_the_servers_environment_is_the_one_given(tool: MCPTool):
    assert body(execute(tool, gem_call("getenv", {"name": "MCP_DEMO_GREETING"}))) == "hello"


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "kind", "says"),
    [
        (gem_call("nope", {}), MCPErrorKind.UNKNOWN_TOOL, "Tool 'nope' not found. Available tools: add, "),
        (gem_call("add", '{"a": 2,'), MCPErrorKind.INVALID_ARGUMENTS, "not valid JSON"),
        (gem_call("add", "[1, 2]"), MCPErrorKind.INVALID_ARGUMENTS, "must be a JSON object"),
        (gem_call("add", {"a": 2}), MCPErrorKind.INVALID_ARGUMENTS, "'b' is a required property"),
        (json_call("add", {"a": "two", "b": 3}), MCPErrorKind.INVALID_ARGUMENTS, "a: 'two' is not of type 'integer'"),
        (json_call("mcp", {"arguments": {}}), MCPErrorKind.UNKNOWN_TOOL, "Tool '' not found"),
    ],
    ids=["unknown-tool", "bad-json", "not-an-object", "missing-argument", "wrong-type", "dispatch-without-name"],
)
def test_botched_calls_are_answered_with_a_typed_error(tool: MCPTool, action: str, kind: MCPErrorKind, says: str):
    output = execute(tool, action)
    assert output.error
    assert body(output).startswith("[Tool execution failed: ") and says in body(output)
    assert output.details["error"] == kind.value and output.details["status"] == "error"


def test_errors_the_tool_reports_are_gems_execution_errors(tool: MCPTool):
    output = execute(tool, gem_call("fail", {"message": "boom"}))
    assert output.error and body(output).startswith("[Tool execution error: ") and "boom" in body(output)
    assert output.details["error"] == MCPErrorKind.TOOL_ERROR.value
    output = execute(tool, gem_call("lookup", {"country": "Atlantis"}))
    assert output.error and "no capital known for 'Atlantis'" in body(output)
    is_valid, has_error, _, _ = tool.execute_action(gem_call("divide", {"a": 1, "b": 0}))
    assert (is_valid, has_error) == (True, True)


def test_server_side_validation_still_answers_when_the_client_skips_it(tool: MCPTool):
    tool.validate_arguments = False
    try:
        output = execute(tool, gem_call("add", {"a": "two", "b": 3}))
    finally:
        tool.validate_arguments = True
    assert output.details["error"] == MCPErrorKind.TOOL_ERROR.value and "validation error" in body(output)


def test_a_call_past_its_timeout_fails_and_the_session_goes_on(tool: MCPTool):
    started = time.monotonic()
    output = execute(tool, gem_call("sleep", {"seconds": 10}))
    assert time.monotonic() - started < 5
    assert output.error and body(output) == "[Tool execution failed: 'sleep' did not finish within 1s]"
    assert output.details["error"] == MCPErrorKind.TIMEOUT.value and output.details["status"] == "timeout"
    assert body(execute(tool, gem_call("add", {"a": 1, "b": 1}))) == "2"


def test_a_server_that_dies_mid_call_is_an_infra_error_and_the_next_call_respawns_it(tool: MCPTool):
    before = server_pid(execute(tool, gem_call("pid")))
    output = execute(tool, gem_call("crash"))
    assert output.error and "went away during 'crash'" in body(output)
    assert output.details["error"] == MCPErrorKind.CONNECTION.value and output.details["status"] == "infra_error"
    assert gone(before)
    after = server_pid(execute(tool, gem_call("pid")))
    assert after != before


def test_a_server_killed_between_calls_is_replaced(tool: MCPTool):
    before = server_pid(execute(tool, gem_call("pid")))
    os.kill(before, signal.SIGKILL)
    output = execute(tool, gem_call("pid"))  # the call that finds it dead, unless the SDK saw it first
    if output.error:
        assert output.details["error"] == MCPErrorKind.CONNECTION.value, output.observation
        assert output.details["status"] == "infra_error"
        output = execute(tool, gem_call("pid"))
    assert server_pid(output) != before
    assert gone(before)


def test_a_server_that_cannot_start_fails_at_construction_or_as_an_infra_error():
    dead = ["-c", "import sys; sys.exit(1)"]
    with pytest.raises(MCPConnectionError, match="cannot reach the MCP server"):
        MCPTool(command=sys.executable, args=dead)
    tool = MCPTool(command=sys.executable, args=dead, validate_on_init=False)
    assert tool.parse(json_call("add", {"a": 1})) is None  # no tool list to claim it by
    output = execute(tool, gem_call("add", {"a": 1, "b": 2}))
    assert output.error and output.details["error"] == MCPErrorKind.CONNECTION.value
    assert output.details["status"] == "infra_error" and body(output).startswith("[Tool execution failed: cannot reach")
    tool.close()


def test_a_server_that_never_answers_the_handshake_fails_within_the_connect_timeout():
    started = time.monotonic()
    with pytest.raises(MCPConnectionError, match="no handshake and tool listing within 1s"):
        MCPTool(command=sys.executable, args=["-c", "import time; time.sleep(60)"], connect_timeout=1)
    assert time.monotonic() - started < 10  # the SDK's shutdown of the silent process included


# -- the session's lifetime -------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_session_opens_in_one_task_serves_others_and_closes_from_another():
    tool = stdio_tool(validate_on_init=False, timeout=5.0)
    outputs: list[ToolOutput] = []

    async def call(action: str) -> None:
        outputs.append(await aexecute(tool, action))

    async with anyio.create_task_group() as tg:  # the first call opens it, in a task that then ends
        tg.start_soon(call, gem_call("pid"))
    pid = server_pid(outputs[0])
    with anyio.move_on_after(0.3):  # a caller cancelled mid-call leaves the session usable
        await aexecute(tool, gem_call("sleep", {"seconds": 5}))
    async with anyio.create_task_group() as tg:  # concurrent calls share it
        for i in range(3):
            tg.start_soon(call, gem_call("add", {"a": i, "b": 10}))
    assert sorted(body(output) for output in outputs[1:]) == ["10", "11", "12"]
    assert server_pid(await aexecute(tool, gem_call("pid"))) == pid
    async with anyio.create_task_group() as tg:
        tg.start_soon(tool.aclose)
    assert gone(pid), "closing the tool left its server running"
    await tool.aclose()  # twice is fine


@pytest.mark.anyio
async def test_async_callers_reach_a_session_on_the_sync_loop(tool: MCPTool):
    assert body(await aexecute(tool, gem_call("reverse", {"text": "loop"}))) == "pool"


# -- over HTTP -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_over_http_tools_results_errors_and_timeouts(http_url: str):
    tool = MCPTool(http_url, timeout=1.0, validate_on_init=False)
    try:
        specs = await tool.alist_tools()
        assert {spec.name for spec in specs} == DEMO_TOOLS
        assert next(spec for spec in specs if spec.name == "reverse").input_schema["required"] == ["text"]
        assert body(await aexecute(tool, gem_call("add", {"a": 40, "b": 2}))) == "42"
        assert body(await aexecute(tool, json_call("lookup", {"country": "peru"}))) == "Lima"
        output = await aexecute(tool, gem_call("fail", {"message": "over http"}))
        assert output.details["error"] == MCPErrorKind.TOOL_ERROR.value and "over http" in body(output)
        output = await aexecute(tool, gem_call("sleep", {"seconds": 10}))
        assert output.details["error"] == MCPErrorKind.TIMEOUT.value
        assert body(await aexecute(tool, gem_call("reverse", {"text": "ok"}))) == "ko"
    finally:
        await tool.aclose()


@pytest.mark.anyio
async def test_listing_inside_a_running_loop_does_not_need_the_session(http_url: str):
    tool = MCPTool.from_url(http_url)  # lists over a connection of its own: this loop cannot be blocked on
    try:
        assert {spec["function"]["name"] for spec in tool.schemas()} == DEMO_TOOLS
        assert body(await aexecute(tool, gem_call("add", {"a": 1, "b": 1}))) == "2"
    finally:
        await tool.aclose()


@pytest.mark.anyio
async def test_an_http_server_that_dies_mid_episode(tmp_path: Path):
    with http_server(tmp_path) as (proc, url):
        tool = MCPTool(url, validate_on_init=False, timeout=5.0)
        lost = MCPTool(url, validate_on_init=False, timeout=5.0, reconnect=False)
        try:
            assert body(await aexecute(tool, gem_call("add", {"a": 1, "b": 2}))) == "3"
            assert body(await aexecute(lost, gem_call("add", {"a": 1, "b": 2}))) == "3"
            output = await aexecute(tool, gem_call("crash"))
            assert output.details["error"] == MCPErrorKind.CONNECTION.value, output.observation
            assert output.details["status"] == "infra_error"
            proc.wait(10)
            for t in (tool, lost):  # gone for good: a reconnect fails, or is not tried
                output = await aexecute(t, gem_call("add", {"a": 1, "b": 2}))
                assert output.details["error"] == MCPErrorKind.CONNECTION.value, output.observation
            output = await aexecute(lost, gem_call("add", {"a": 1, "b": 2}))
            assert "was lost" in body(output)
        finally:
            await tool.aclose()
            await lost.aclose()


def test_an_unreachable_url_fails_at_construction_and_reconfigure_points_elsewhere(http_url: str):
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(MCPConnectionError, match="cannot reach the MCP server"):
        MCPTool(dead, connect_timeout=10)
    tool = MCPTool(dead, validate_on_init=False)
    try:
        assert execute(tool, gem_call("add", {"a": 1, "b": 1})).details["error"] == MCPErrorKind.CONNECTION.value
        tool.reconfigure(http_url)
        assert body(execute(tool, gem_call("add", {"a": 1, "b": 1}))) == "2"
    finally:
        tool.close()


def test_gems_config_forms(tmp_path: Path, http_url: str):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": {"transport": "http", "url": http_url}}}))
    tool = MCPTool.from_config_file(config, auth="secret")
    try:
        assert tool.url == http_url and tool.headers == {"Authorization": "Bearer secret"}
        listed = {entry["name"]: entry for entry in tool.get_available_tools()}  # GEM's listing
        assert set(listed) == DEMO_TOOLS and listed["add"]["parameters"]["required"] == ["a", "b"]
        assert body(execute(tool, gem_call("add", {"a": 2, "b": 2}))) == "4"  # the headers go along
    finally:
        tool.close()
    local = MCPTool.from_local_command(
        {"command": "python3", "args": ["-m", "server"], "env": {"K": "v"}}, validate_on_init=False
    )
    assert (local.command, local.args, local.env, local.url) == ("python3", ["-m", "server"], {"K": "v"}, None)
    with pytest.raises(ValueError, match="one server"):
        MCPTool({"mcpServers": {"a": {"url": http_url}, "b": {"url": http_url}}})
    with pytest.raises(ValueError, match="needs a command"):
        MCPTool({"transport": "stdio", "args": []})
    with pytest.raises(ValueError, match="needs a server"):
        MCPTool()


# -- an episode -------------------------------------------------------------------------------


def test_an_episode_through_the_tool_wrapper(http_url: str):
    tool = MCPTool({"mcpServers": {"demo": {"transport": "http", "url": http_url}}}, timeout=5.0)
    env = ToolEnvWrapper(gem_sandbox.make("math:Arithmetic-v0"), tools=[tool], tool_success_reward=0.5)
    try:
        obs, info = env.reset(seed=3)
        assert "<tool_name>" in obs and '"name": "add"' in obs
        obs, reward, terminated, truncated, info = env.step(f"I will add first. {gem_call('add', {'a': 20, 'b': 22})}")
        assert obs == "\n<tool_response>\n42\n</tool_response>\n" and reward == 0.5
        assert not (terminated or truncated) and info["tool_type"] == "mcp" and info["tool_use_counter"] == 1
        obs, reward, _, _, info = env.step(json_call("reverse", {"text": "abc"}))
        assert obs == "\n<tool_response>\ncba\n</tool_response>\n" and info["tool_success_counter"] == 2
        obs, reward, _, _, info = env.step(gem_call("nope", {}))
        assert "Tool 'nope' not found" in obs and reward == 0 and info["tool_success_counter"] == 2
        answer = env.unwrapped.answer
        obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{answer}}}")
        assert reward == 1.0 and terminated
    finally:
        env.close()
