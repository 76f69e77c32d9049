"""The remote runtime: tools, envs and the GEM drop-in on the pool service, over real HTTP on
loopback (docs/service.md, "Remote runtime"). The service runs Docker sandboxes; the cases with
no service at all (nothing listening) need no Docker."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import aiohttp
import anyio
import anyio.abc
import pytest
import yarl
from gem_sandbox_envs.math.arithmetic import ArithmeticEnv

from gem_sandbox.integrations import gem as drop_in
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.errors import (
    ConfigError,
    FileTransferError,
    RemoteUnsupported,
    SandboxCrashed,
    SandboxUnavailable,
    ServiceAuthError,
    ServiceUnreachable,
    UnsafePath,
    UnsupportedLanguage,
)
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.service import TokenPolicy
from gem_sandbox.service.state import Service
from gem_sandbox.sync import close_default_runtime, resolve_runtime, run_sync
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.tools.shell import ShellTool
from gem_sandbox.wrappers import ToolEnvWrapper
from tests.service_fixtures import ALPHA, auth, docker_client, sandbox_image, service, serving  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio
docker = pytest.mark.docker


@pytest.fixture
async def runtime(service: Service) -> AsyncIterator[Runtime]:  # noqa: F811
    async with Runtime(url=service.url, token=ALPHA.secret) as opened:
        yield opened


def closed_port_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


# -- choosing the remote runtime ------------------------------------------------------------


def test_a_runtime_takes_a_backend_or_a_url_not_both():
    with pytest.raises(ConfigError, match="not a backend .'local'. and a service url"):
        Runtime("local", url="http://127.0.0.1:8080")


def test_gem_sandbox_url_makes_a_runtime_given_no_backend_remote(monkeypatch):
    monkeypatch.setattr(defaults, "_backend_name", None)
    monkeypatch.setenv("GEM_SANDBOX_URL", "http://127.0.0.1:8080/t/s3cret")
    assert repr(Runtime()) == "<Runtime remote new>"
    assert repr(Runtime("auto")) == "<Runtime auto new>"  # a backend named wins
    monkeypatch.setattr(defaults, "_backend_name", "process")  # as configure(backend="process") does
    assert repr(Runtime()) == "<Runtime auto new>"


async def test_without_a_service_runs_are_infra_errors_and_leases_unavailable():
    async with Runtime(url=closed_port_url() + "/t/s3cret") as runtime:
        result = await runtime.run("print(1)")
        assert result.status is Status.INFRA_ERROR and "could not be reached" in result.stderr
        assert "s3cret" not in result.stderr  # the URL's token is never shown
        with pytest.raises(ServiceUnreachable):
            await runtime.acquire(timeout=1)
        output = await PythonCodeTool(runtime=runtime).aexecute(PythonCodeTool().parse("<python>print(1)</python>"))
        assert output.details["status"] == "infra_error"  # a trainer masks it
        assert runtime.backend == "remote"


# -- runs ----------------------------------------------------------------------------------


@docker
async def test_runs_answer_the_same_exec_results_as_a_local_pool(runtime: Runtime):
    ok = await runtime.run("import sys, os; print(sys.stdin.read() + os.environ['X'])", stdin="a", env={"X": "b"})
    failed = await runtime.run("echo no >&2; exit 3", "bash")
    hung = await runtime.run("import time; time.sleep(30)", timeout=1)
    assert isinstance(ok, ExecResult) and (ok.status, ok.exit_code, ok.stdout) == (Status.OK, 0, "ab\n")
    assert (failed.status, failed.exit_code, failed.stderr) == (Status.ERROR, 3, "no\n")
    assert hung.status is Status.TIMEOUT and 900 < hung.duration_ms < 5000
    assert runtime.backend == "remote"


@docker
async def test_a_run_gets_its_files_and_its_limits(runtime: Runtime):
    read = await runtime.run("print(open('d/in.txt').read() + open('b').read())", files={"d/in.txt": "41", "b": b"!"})
    capped = await runtime.run("print('x' * 5000)", limits=RunLimits(max_output_bytes=100))
    assert read.stdout == "41!\n"
    assert capped.truncated and capped.stdout_bytes == 5001 and len(capped.stdout) < 200


@docker
async def test_the_callers_mistakes_raise_typed_errors(runtime: Runtime):
    with pytest.raises(UnsupportedLanguage):
        await runtime.run("x", "cobol")
    async with runtime.lease() as sandbox:
        with pytest.raises(RemoteUnsupported, match="cwd"):
            await sandbox.run("print(1)", cwd="sub")
        with pytest.raises(UnsafePath):
            await sandbox.write_files({"../escape": "x"})
        with pytest.raises(FileTransferError, match="missing"):
            await sandbox.read_files(["missing"])
        assert sandbox.alive  # none of them hurt the lease


# -- leases --------------------------------------------------------------------------------


@docker
async def test_a_lease_keeps_shell_kernel_and_file_state(runtime: Runtime):
    async with runtime.lease() as sandbox:
        assert sandbox.backend == "docker" and "python" in sandbox.hello["languages"]
        assert (await sandbox.shell("mkdir d && cd d && export X=7")).ok
        assert (await sandbox.shell("echo $X $(basename $PWD)")).stdout == "7 d\n"
        await sandbox.kernel_exec("n = 20")
        assert (await sandbox.kernel_exec("print(n + 1)")).stdout == "21\n"
        shown = await sandbox.kernel_exec("n * 2", display=True)
        assert (shown.stdout, shown.display, shown.display_value) == ("", ({"text/plain": "40"},), 0)
        await sandbox.kernel_restart()
        assert "NameError" in (await sandbox.kernel_exec("n")).stderr
        blob = bytes(range(256))
        await sandbox.write_files({"b.bin": blob, "s.sh": "echo run"}, dest="w", executable=["s.sh"])
        assert (await sandbox.run("./w/s.sh", "bash")).stdout == "run\n"
        assert await sandbox.read_files(["w/b.bin", "w/s.sh"]) == {"w/b.bin": blob, "w/s.sh": b"echo run"}
        assert await sandbox.ping() > 0
        await sandbox.reset()
        with pytest.raises(FileTransferError):
            await sandbox.read_files(["w/b.bin"])
        assert runtime.statistics().leased == 1
    assert (runtime.statistics().leases, runtime.statistics().leased) == (1, 0)


@docker
async def test_a_lease_the_service_ended_is_a_crashed_sandbox(service: Service, runtime: Runtime):  # noqa: F811
    sandbox = await runtime.acquire()
    async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as http:
        async with http.delete(f"/v1/sandboxes/{sandbox.id}") as response:
            assert response.status == 204
    with pytest.raises(SandboxCrashed, match="expired or was deleted"):
        await sandbox.read_files(["x"])
    assert not sandbox.alive
    assert (await sandbox.shell("echo 1")).status is Status.INFRA_ERROR  # runs never raise for it
    await runtime.release(sandbox)  # the service's 404 for it is no error
    assert runtime.statistics().leased == 0


@docker
async def test_closing_the_runtime_ends_its_leases_on_the_service(service: Service):  # noqa: F811
    async with Runtime(url=f"{service.url}/t/{ALPHA.secret}") as runtime:  # the token in the URL
        await runtime.wait_ready(10)
        await runtime.acquire()
        await runtime.acquire()
        assert len(service.leases) == 2
    assert len(service.leases) == 0


@docker
async def test_a_lease_past_the_tokens_quota_is_unavailable_until_one_ends(runtime: Runtime):
    held = [await runtime.acquire() for _ in range(ALPHA.max_leases)]
    started = anyio.current_time()
    with pytest.raises(SandboxUnavailable, match="too_many_leases"):
        await runtime.acquire(timeout=1.5)
    assert anyio.current_time() - started >= 1  # it waited as Retry-After said before giving up
    await runtime.release(held.pop())
    held.append(await runtime.acquire(timeout=1.5))
    for sandbox in held:
        await runtime.release(sandbox)


@docker
async def test_a_refused_token_raises_instead_of_being_masked(service: Service):  # noqa: F811
    async with Runtime(url=service.url, token="wrong") as runtime:
        with pytest.raises(ServiceAuthError, match="check"):
            await runtime.run("print(1)")
        with pytest.raises(ServiceAuthError):
            await runtime.acquire()
        with pytest.raises(ServiceAuthError):
            await PythonCodeTool(runtime=runtime).aexecute(PythonCodeTool().parse("<python>1</python>"))


# -- retries -------------------------------------------------------------------------------


class DropOneAnswer:
    """A TCP proxy on 127.0.0.1 in front of the service that, once, swallows the service's
    answer to a lease's run and closes the client's connection instead: the code ran, and the
    client saw its connection lost, as when a network fails at the worst moment."""

    def __init__(self, service_url: str) -> None:
        url = yarl.URL(service_url)
        self.upstream = (url.host or "127.0.0.1", url.port or 80)
        self.dropped = 0

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[str]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, self._relay)
            yield f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}"
            tg.cancel_scope.cancel()

    async def _relay(self, client: anyio.abc.SocketStream) -> None:
        asked = bytearray()  # what the client sent since the last answer began

        async def requests(upstream: anyio.abc.SocketStream, done: anyio.CancelScope) -> None:
            async for chunk in client:
                asked.extend(chunk)
                await upstream.send(chunk)
            done.cancel()

        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            async with client, await anyio.connect_tcp(*self.upstream) as upstream:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(requests, upstream, tg.cancel_scope)
                    async for chunk in upstream:
                        if not self.dropped and b"/run HTTP/1.1" in asked:
                            self.dropped += 1
                            break
                        asked.clear()
                        await client.send(chunk)
                    tg.cancel_scope.cancel()


@docker
async def test_a_run_retried_after_a_lost_answer_runs_once(service: Service):  # noqa: F811
    proxy = DropOneAnswer(service.url)
    async with proxy.listening() as url, Runtime(url=url, token=ALPHA.secret) as runtime:
        async with runtime.lease() as sandbox:
            result = await sandbox.run("open('log', 'a').write('x')")
            assert result.ok and proxy.dropped == 1  # the retry got the first attempt's answer
            assert await sandbox.read_files(["log"]) == {"log": b"x"}


@docker
async def test_rate_limited_requests_wait_as_told_and_succeed(sandbox_image: str):  # noqa: F811
    slow = TokenPolicy(name="slow", secret="slow-secret", rate=2.0, burst=1)
    async with serving("docker", sandbox_image, tokens=(slow,)) as running:
        async with Runtime(url=running.url, token=slow.secret) as runtime:
            results = [await runtime.run("print(1)") for _ in range(3)]
        metrics = running.metrics.render()
    assert all(result.ok for result in results)
    assert b'gem_sandbox_rejections_total{reason="rate_limited"}' in metrics


# -- tools, envs and the GEM drop-in ---------------------------------------------------------


@docker
async def test_a_stateful_tool_episode_keeps_its_lease_on_the_service(service: Service, runtime: Runtime):  # noqa: F811
    tools = [PythonCodeTool(runtime=runtime, stateful=True), ShellTool(runtime=runtime)]
    env = ToolEnvWrapper(ArithmeticEnv(seed=0), tools)
    await env.areset(seed=0)
    await env.astep("<python>x = 20</python>")
    obs, *_ = await env.astep("<python>print(x + 22)</python>")
    assert "42" in obs and runtime.statistics().leased == 1 and len(service.leases) == 1
    obs, *_ = await env.astep("<bash>echo hi</bash>")
    assert "hi" in obs
    await env.aclose()
    assert runtime.statistics().leased == 0 and len(service.leases) == 0


@docker
async def test_gem_sandbox_url_sends_sync_code_and_the_gem_drop_in_to_the_service(
    service: Service,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(defaults, "_backend_name", None)
    monkeypatch.setenv("GEM_SANDBOX_URL", service.url)
    monkeypatch.setenv("GEM_SANDBOX_SERVICE_TOKEN", ALPHA.secret)
    gem_tool = pytest.importorskip("gem.tools.python_code_tool", reason="gem-llm is not installed")

    def sync_code() -> tuple[str, str | None, str]:
        """Blocking code, in a thread so that this loop goes on serving."""
        close_default_runtime()  # the next sync use opens one with the variables above
        try:
            observation = PythonCodeTool().execute_action("<python>print(6 * 7)</python>")[2]
            backend = run_sync(resolve_runtime, None).backend
            drop_in.install()
            try:
                gem_observation = gem_tool.PythonCodeTool().execute_action("<python>print(1 + 1)</python>")[2]
            finally:
                drop_in.uninstall()
        finally:
            close_default_runtime()
        return observation, backend, gem_observation

    observation, backend, gem_observation = await anyio.to_thread.run_sync(sync_code)
    assert (observation, backend) == ("Code execution result: 42\n\n", "remote")
    assert gem_observation == "Code execution result: 2\n\n"
    assert b'gem_sandbox_runs_total{status="ok"} 2.0' in service.metrics.render()
