"""The e2b-compatible endpoint (docs/service.md) driven by the unmodified ``e2b`` and
``e2b-code-interpreter`` SDKs against a real service with the Docker backend: the control
plane, envd's files and filesystem RPCs, health, and the code interpreter."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any


import aiohttp
import anyio
import e2b
import pytest
from e2b_code_interpreter import AsyncSandbox as CodeSandbox

from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, BETA, docker_client, sandbox_image, serving  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
async def service(sandbox_image: str) -> AsyncIterator[Service]:  # noqa: F811
    async with serving("docker", sandbox_image, e2b_compatible=True) as running:
        yield running


def sdk(service: Service, key: str = ALPHA.secret) -> dict[str, Any]:
    """What points the SDK at the service, as ``E2B_API_URL``, ``E2B_SANDBOX_URL`` and
    ``E2B_API_KEY`` would."""
    return {"api_url": service.url, "sandbox_url": service.url, "api_key": key}


# -- control plane -----------------------------------------------------------------------


async def test_a_sandbox_is_created_inspected_listed_timed_out_and_killed(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(timeout=120, metadata={"user id": "a&b", "run": "7"}, **sdk(service))
    info = await sandbox.get_info()
    assert (info.sandbox_id, info.template_id, info.metadata) == (sandbox.sandbox_id, "base", {"user id": "a&b", "run": "7"})
    assert 100 < (info.end_at - info.started_at).total_seconds() <= 121
    await sandbox.set_timeout(30)
    assert (await sandbox.get_info()).end_at < info.end_at
    assert await sandbox.is_running()

    query = e2b.SandboxQuery(metadata={"user id": "a&b"})
    listed = await e2b.AsyncSandbox.list(query=query, **sdk(service)).next_items()
    assert [s.sandbox_id for s in listed] == [sandbox.sandbox_id]
    other = await e2b.AsyncSandbox.list(query=e2b.SandboxQuery(metadata={"run": "8"}), **sdk(service)).next_items()
    assert other == []

    await sandbox.kill()
    assert await e2b.AsyncSandbox.list(**sdk(service)).next_items() == []
    assert not await sandbox.is_running()
    with pytest.raises(e2b.SandboxNotFoundException):
        await e2b.AsyncSandbox.get_info(sandbox.sandbox_id, **sdk(service))
    assert await e2b.AsyncSandbox.kill(sandbox.sandbox_id, **sdk(service)) is False


async def test_the_sync_sdk_works_too(service: Service) -> None:
    def session() -> tuple[str, str]:
        with e2b.Sandbox.create(**sdk(service)) as sandbox:
            sandbox.files.write("hello.txt", "hi")
            return sandbox.files.read("/home/user/hello.txt"), sandbox.get_info().template_id

    assert await anyio.to_thread.run_sync(session) == ("hi", "base")


async def test_list_pages_with_its_next_token(service: Service) -> None:
    sandboxes = [await e2b.AsyncSandbox.create(**sdk(service)) for _ in range(3)]
    paginator = e2b.AsyncSandbox.list(limit=2, **sdk(service))
    first = await paginator.next_items()
    assert paginator.has_next and len(first) == 2
    second = await paginator.next_items()
    assert not paginator.has_next
    assert {s.sandbox_id for s in first + second} == {s.sandbox_id for s in sandboxes}


async def test_list_is_newest_first_and_filters_by_start(service: Service) -> None:
    older = await e2b.AsyncSandbox.create(**sdk(service))
    await anyio.sleep(0.01)
    cut = datetime.now(UTC)
    newer = await e2b.AsyncSandbox.create(**sdk(service))
    listed = await e2b.AsyncSandbox.list(**sdk(service)).next_items()
    assert [s.sandbox_id for s in listed] == [newer.sandbox_id, older.sandbox_id]
    oldest_first = await e2b.AsyncSandbox.list(order="asc", **sdk(service)).next_items()
    assert [s.sandbox_id for s in oldest_first] == [older.sandbox_id, newer.sandbox_id]
    recent = await e2b.AsyncSandbox.list(query=e2b.SandboxQuery(started_after=cut), **sdk(service)).next_items()
    assert [s.sandbox_id for s in recent] == [newer.sandbox_id]


async def test_metrics_are_read_from_the_sandbox_each_time_they_are_asked_for(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.write("ballast.bin", b"x" * 3_000_000)
    busy = await sandbox.commands.run("python3 -c 'while True: pass'", background=True)
    await anyio.sleep(1)
    first = await sandbox.get_metrics()
    await busy.kill()
    (sample,) = first
    assert sample.cpu_count >= 1 and 20 < sample.cpu_used_pct <= 100
    assert 0 < sample.mem_used < sample.mem_total and sample.disk_used >= 3_000_000 < sample.disk_total
    both = await e2b.AsyncSandbox.get_metrics(sandbox.sandbox_id, **sdk(service))
    assert [m.timestamp for m in both[:1]] == [sample.timestamp] and len(both) == 2
    assert await sandbox.get_metrics(start=datetime.now(UTC) + timedelta(minutes=1)) == []


async def test_an_unknown_template_is_an_error_not_the_default_image(service: Service) -> None:
    with pytest.raises(e2b.SandboxException, match="template 'no-such-template' not found"):
        await e2b.AsyncSandbox.create("no-such-template", **sdk(service))


async def test_a_template_built_from_a_dockerfile_is_served_by_name(
    service: Service, sandbox_image: str, docker_client: Any, tmp_path: Any  # noqa: F811
) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {sandbox_image}\n"
        "RUN echo baked > /opt/marker && rm /home/user && mkdir /home/user && echo hi > /home/user/greeting.txt\n"
    )
    build = [sys.executable, "-m", "gem_sandbox.cli", "images", "build", "--template", "gem-tests-greeter"]
    built = await anyio.run_process([*build, "--dockerfile", str(tmp_path / "Dockerfile")], check=False)
    assert built.returncode == 0, built.stderr.decode()
    try:
        sandbox = await e2b.AsyncSandbox.create("gem-tests-greeter", **sdk(service))
        result = await sandbox.commands.run("cat /opt/marker greeting.txt; echo more >> greeting.txt")
        assert result.stdout == "baked\nhi\n" and (await sandbox.get_info()).template_id == "gem-tests-greeter"
        assert await sandbox.files.read("/home/user/greeting.txt") == "hi\nmore\n"
        plain = await e2b.AsyncSandbox.create(**sdk(service))
        assert (await plain.commands.run("test -e /opt/marker || echo absent")).stdout == "absent\n"
    finally:
        docker_client.images.remove(built.stdout.decode().strip(), force=True)


async def test_a_wrong_api_key_is_refused(service: Service) -> None:
    with pytest.raises(e2b.AuthenticationException):
        await e2b.AsyncSandbox.create(**sdk(service, key="not-a-token"))


async def test_another_tokens_sandbox_is_not_found(service: Service) -> None:
    mine = await e2b.AsyncSandbox.create(**sdk(service))
    with pytest.raises(e2b.SandboxNotFoundException):
        await e2b.AsyncSandbox.get_info(mine.sandbox_id, **sdk(service, BETA.secret))
    assert await e2b.AsyncSandbox.kill(mine.sandbox_id, **sdk(service, BETA.secret)) is False
    assert await e2b.AsyncSandbox.list(**sdk(service, BETA.secret)).next_items() == []
    assert await mine.is_running()


async def test_sandboxes_past_the_tokens_limit_are_rate_limited(service: Service) -> None:
    for _ in range(ALPHA.max_leases):
        await e2b.AsyncSandbox.create(**sdk(service))
    with pytest.raises(e2b.RateLimitException):
        await e2b.AsyncSandbox.create(retries=0, **sdk(service))


async def test_the_routes_are_served_only_when_asked_for(sandbox_image: str) -> None:  # noqa: F811
    headers = {"X-API-KEY": ALPHA.secret}
    async with (
        serving("docker", sandbox_image) as plain,
        aiohttp.ClientSession(plain.url) as http,
        http.post("/v2/sandboxes", json={}, headers=headers) as response,
    ):
        assert response.status == 404


async def test_a_sandbox_ends_at_its_timeout_whatever_it_serves(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(timeout=2, **sdk(service))
    for _ in range(3):  # requests do not push an e2b deadline back
        await sandbox.files.write("a.txt", "x")
        await anyio.sleep(0.5)
    with anyio.fail_after(10):
        while await sandbox.is_running():
            await anyio.sleep(0.25)
    assert len(service.leases) == 0
    with pytest.raises(e2b.SandboxNotFoundException):
        await sandbox.get_info()


async def test_envd_requests_need_the_sandboxes_access_token(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    async with aiohttp.ClientSession(service.url) as http:
        headers = {"E2b-Sandbox-Id": sandbox.sandbox_id, "X-Access-Token": "wrong"}
        async with http.get("/files", params={"path": "a"}, headers=headers) as response:
            assert response.status == 401
            assert (await response.json())["code"] == 401
        async with http.get("/health", headers={"E2b-Sandbox-Id": "sb-none"}) as response:
            assert response.status == 502
            assert await response.json() == {"code": 502, "message": "The sandbox sb-none was not found"}


# -- files -------------------------------------------------------------------------------


async def test_files_round_trip_through_write_read_and_list(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    blob = bytes(range(256)) * 4
    written = await sandbox.files.write("/home/user/text.txt", "héllo\r\nwörld\n")
    assert (written.path, written.name) == ("/home/user/text.txt", "text.txt")
    assert await sandbox.files.make_dir("/home/user/data/nested")
    assert not await sandbox.files.make_dir("data/nested")  # already there
    await sandbox.files.write_files(
        [
            {"path": "data/nested/blob.bin", "data": blob},
            {"path": "/home/user/data/b.txt", "data": "b"},
        ]
    )
    await sandbox.files.write("data/gz.txt", "zipped", gzip=True)  # a raw, gzip-encoded upload

    assert await sandbox.files.read("text.txt") == "héllo\r\nwörld\n"
    assert await sandbox.files.read("/home/user/data/nested/blob.bin", format="bytes") == blob
    assert await sandbox.files.read("data/gz.txt") == "zipped"
    top = await sandbox.files.list("/home/user")
    assert {(e.name, e.type) for e in top} == {("text.txt", e2b.FileType.FILE), ("data", e2b.FileType.DIR)}
    deep = await sandbox.files.list("/home/user/data", depth=2)
    assert {e.path for e in deep} == {
        "/home/user/data/nested",
        "/home/user/data/nested/blob.bin",
        "/home/user/data/b.txt",
        "/home/user/data/gz.txt",
    }
    info = await sandbox.files.get_info("data/nested/blob.bin")
    assert (info.size, info.type, info.path) == (len(blob), e2b.FileType.FILE, "/home/user/data/nested/blob.bin")


async def test_exists_remove_and_rename(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.write("old.txt", "x")
    assert await sandbox.files.exists("/home/user/old.txt")
    moved = await sandbox.files.rename("old.txt", "/home/user/sub/new.txt")
    assert moved.path == "/home/user/sub/new.txt"
    assert not await sandbox.files.exists("old.txt")
    await sandbox.files.remove("sub")
    assert not await sandbox.files.exists("sub/new.txt")
    with pytest.raises(e2b.FileNotFoundException):
        await sandbox.files.read("sub/new.txt")


async def test_paths_outside_the_home_dir_are_reached_as_the_sandboxs_user(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.write("/tmp/deep/a.bin", bytes(range(256)))
    assert await sandbox.files.read("/tmp/deep/a.bin", format="bytes") == bytes(range(256))
    assert (await sandbox.commands.run("wc -c < /tmp/deep/a.bin")).stdout == "256\n"
    assert [e.path for e in await sandbox.files.list("/tmp/deep")] == ["/tmp/deep/a.bin"]
    assert "passwd" in {e.name for e in await sandbox.files.list("/etc")}  # readable, as to its code
    with pytest.raises(e2b.SandboxException, match="Read-only file system"):
        await sandbox.files.write("/etc/evil", "x")
    with pytest.raises(e2b.InvalidArgumentException, match="not a regular file"):
        await sandbox.files.read("/dev/zero")
    await sandbox.files.write("/home/user/../../tmp/up.txt", "climbed")  # normalized like any path
    assert await sandbox.files.read("/tmp/up.txt") == "climbed"


async def test_links_show_their_targets_lists_go_depth_first_and_removes_are_idempotent(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.write_files([{"path": "a/x/1.txt", "data": "1"}, {"path": "a/y.txt", "data": "y"}])
    await sandbox.commands.run("ln -s a/y.txt link && ln -s /etc/passwd out")
    info = await sandbox.files.get_info("link")
    assert (info.type, info.symlink_target) == (e2b.FileType.FILE, "/home/user/a/y.txt")
    assert (await sandbox.files.get_info("out")).symlink_target == "/etc/passwd"
    with pytest.raises(e2b.SandboxException):  # the agent never reads through a link code made
        await sandbox.files.read("out")
    listed = await sandbox.files.list("a", depth=2)
    assert [e.path for e in listed] == ["/home/user/a/x", "/home/user/a/x/1.txt", "/home/user/a/y.txt"]
    await sandbox.files.remove("never-there")


async def python_runs(sandbox: e2b.AsyncSandbox) -> int:
    """Python programs running as the sandbox's user (a watcher is one)."""
    listing = (await sandbox.commands.run("ps -eo uid=,comm=")).stdout.split()
    return sum(int(uid) >= 10_000_000 and comm == "python3" for uid, comm in zip(listing[::2], listing[1::2], strict=True))


async def test_watch_dir_streams_the_sandboxs_file_events(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    await sandbox.files.make_dir("w/old")
    assert await python_runs(sandbox) == 0
    seen: list[tuple[str, e2b.FilesystemEventType]] = []
    handle = await sandbox.files.watch_dir("w", on_event=lambda e: seen.append((e.name, e.type)), recursive=True)
    await sandbox.files.write("w/a.txt", "a")
    await sandbox.commands.run("mkdir w/new && echo b > w/new/b.txt && echo c > w/old/c.txt && rm w/a.txt")
    with anyio.fail_after(10):
        while ("a.txt", e2b.FilesystemEventType.REMOVE) not in seen:
            await anyio.sleep(0.05)
    await handle.stop()
    assert {("a.txt", e2b.FilesystemEventType.CREATE), ("a.txt", e2b.FilesystemEventType.WRITE)} <= set(seen)
    assert {("new/b.txt", e2b.FilesystemEventType.WRITE), ("old/c.txt", e2b.FilesystemEventType.CREATE)} <= set(seen)
    with pytest.raises(e2b.NotFoundException):
        await sandbox.files.watch_dir("nowhere", on_event=lambda e: None)
    with pytest.raises(e2b.SandboxException, match="not a directory"):
        await sandbox.files.watch_dir("w/old/c.txt", on_event=lambda e: None)
    with anyio.fail_after(10):  # the watcher goes once the service sees the stream closed
        while await python_runs(sandbox):
            await anyio.sleep(0.1)


async def test_the_sync_sdk_polls_a_watcher(service: Service) -> None:
    def session() -> list[tuple[str, e2b.FilesystemEventType]]:
        with e2b.Sandbox.create(**sdk(service)) as sandbox:
            handle = sandbox.files.watch_dir("/home/user")
            sandbox.files.write("polled.txt", "p")
            events: list[tuple[str, e2b.FilesystemEventType]] = []
            deadline = time.monotonic() + 10
            while ("polled.txt", e2b.FilesystemEventType.WRITE) not in events and time.monotonic() < deadline:
                events += [(e.name, e.type) for e in handle.get_new_events()]
            handle.stop()
            with pytest.raises(e2b.SandboxException):
                handle.get_new_events()
            return events

    assert ("polled.txt", e2b.FilesystemEventType.CREATE) in await anyio.to_thread.run_sync(session)


async def test_file_metadata_lives_in_extended_attributes(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    written = await sandbox.files.write("tagged.txt", "x", metadata={"Author": "ann", "stage": "raw"})
    assert written.metadata == {"author": "ann", "stage": "raw"}
    assert (await sandbox.files.get_info("tagged.txt")).metadata == {"author": "ann", "stage": "raw"}
    assert [e.metadata for e in await sandbox.files.list(".") if e.name == "tagged.txt"] == [{"author": "ann", "stage": "raw"}]
    assert (await sandbox.files.rename("tagged.txt", "moved.txt")).metadata == {"author": "ann", "stage": "raw"}
    await sandbox.files.write("moved.txt", "y")  # an overwrite without metadata drops it
    assert (await sandbox.files.get_info("moved.txt")).metadata is None
    await sandbox.commands.run("""python3 -c "import os; os.setxattr('moved.txt', 'user.e2b.by', b'hand')" """)
    assert (await sandbox.files.get_info("moved.txt")).metadata == {"by": "hand"}
    await sandbox.files.write("/tmp/out.txt", "z", metadata={"k": "v"})
    assert (await sandbox.files.get_info("/tmp/out.txt")).metadata == {"k": "v"}


async def test_signed_urls_need_no_token_and_expire(service: Service) -> None:
    sandbox = await e2b.AsyncSandbox.create(**sdk(service))
    async with aiohttp.ClientSession() as browser:  # no headers, as a browser or curl sends
        form = aiohttp.FormData()
        form.add_field("file", b"uploaded", filename="up.txt")
        async with browser.post(sandbox.upload_url("/home/user/up.txt"), data=form) as uploaded:
            assert uploaded.status == 200
        async with browser.get(sandbox.download_url("/home/user/up.txt", use_signature_expiration=60)) as got:
            assert (got.status, await got.read()) == (200, b"uploaded")
        forged = sandbox.download_url("/home/user/up.txt").replace("path=%2Fhome%2Fuser%2Fup.txt", "path=%2Fetc%2Fpasswd")
        expired = sandbox.download_url("/home/user/up.txt", use_signature_expiration=-5)
        for url in (forged, expired):
            async with browser.get(url) as refused:
                assert refused.status == 401


# -- code interpreter --------------------------------------------------------------------


async def test_run_code_keeps_state_across_cells(service: Service) -> None:
    sandbox = await CodeSandbox.create(envs={"GREETING": "hi"}, **sdk(service))
    assert (await sandbox.get_info()).template_id == "code-interpreter-v1"
    first = await sandbox.run_code("x = 1\nprint('set')")
    assert (first.logs.stdout, first.error, first.execution_count) == (["set\n"], None, 1)
    second = await sandbox.run_code("x + 1")
    assert (second.text, second.logs.stdout, second.execution_count) == ("2", [], 2)
    env = await sandbox.run_code("import os; print(os.environ['GREETING'], os.environ.get('CELL'))", envs={"CELL": "c"})
    assert env.logs.stdout == ["hi c\n"]
    after = await sandbox.run_code("print(os.environ.get('CELL'))")
    assert after.logs.stdout == ["None\n"]


async def test_what_a_cell_shows_comes_as_results_its_value_the_main_one(service: Service) -> None:
    sandbox = await CodeSandbox.create(**sdk(service))
    code = (
        "class Table:\n"
        "    def _repr_html_(self): return '<table></table>'\n"
        "    def _repr_png_(self): return b'PNG'\n"
        "    def __repr__(self): return 'Table()'\n"
        "display('shown first')\n"
        "print('printed')\n"
        "Table()"
    )
    execution = await sandbox.run_code(code)
    shown, value = execution.results
    assert (shown.text, shown.is_main_result) == ("'shown first'", False)
    assert (value.text, value.html, value.png, value.is_main_result) == ("Table()", "<table></table>", "UE5H", True)
    assert execution.text == "Table()" and execution.logs.stdout == ["printed\n"]
    silenced = await sandbox.run_code("1 + 1;")
    assert (silenced.text, silenced.results) == (None, [])


async def test_a_cells_stdout_streams_while_it_runs(service: Service) -> None:
    sandbox = await CodeSandbox.create(**sdk(service))
    heard: list[tuple[float, str]] = []
    code = "import time\nprint('one', flush=True)\ntime.sleep(0.6)\nprint('two')"
    execution = await sandbox.run_code(code, on_stdout=lambda out: heard.append((anyio.current_time(), out.line)))
    assert [line for _, line in heard] == ["one\n", "two\n"] and heard[1][0] - heard[0][0] > 0.4
    assert execution.logs.stdout == ["one\n", "two\n"]


async def test_an_exception_fills_the_executions_error(service: Service) -> None:
    sandbox = await CodeSandbox.create(**sdk(service))
    execution = await sandbox.run_code("import sys\nprint('before', file=sys.stderr)\n1 / 0")
    assert execution.error is not None
    assert (execution.error.name, execution.error.value) == ("ZeroDivisionError", "division by zero")
    assert "Traceback" in execution.error.traceback
    assert execution.logs.stderr == ["before\n"]
    ok = await sandbox.run_code("print('still here')")
    assert ok.error is None and ok.logs.stdout == ["still here\n"]


async def test_contexts_are_separate_namespaces(service: Service) -> None:
    sandbox = await CodeSandbox.create(**sdk(service))
    await sandbox.files.make_dir("proj")
    context = await sandbox.create_code_context(cwd="/home/user/proj")
    assert context.cwd == "/home/user/proj"
    await sandbox.run_code("y = 5", context=context)
    here = await sandbox.run_code("import os; print(y, os.getcwd().endswith('proj'))", context=context)
    assert here.logs.stdout == ["5 True\n"]
    elsewhere = await sandbox.run_code("y")
    assert elsewhere.error is not None and elsewhere.error.name == "NameError"
    assert context.id in {c.id for c in await sandbox.list_code_contexts()}
    await sandbox.restart_code_context(context)
    assert (await sandbox.run_code("y", context=context)).error is not None
    await sandbox.remove_code_context(context)
    with pytest.raises(e2b.NotFoundException):
        await sandbox.run_code("1", context=context)


async def test_javascript_contexts_keep_their_globals_and_stream(docker_client: Any) -> None:  # noqa: F811
    from gem_sandbox.sandbox.backends.docker import images

    polyglot = images.default_image("polyglot")
    if polyglot is None:
        pytest.skip("the polyglot image is not built: gem-sandbox images build --offline --profile polyglot")
    async with serving("docker", polyglot, pool_options={"min_idle": 1, "max_size": 2}, e2b_compatible=True) as running:
        sandbox = await CodeSandbox.create(**sdk(running))
        first = await sandbox.run_code("let n = 40; console.log('set')", language="javascript")
        assert (first.logs.stdout, first.text, first.error) == (["set\n"], None, None)
        assert (await sandbox.run_code("n + 2", language="js")).text == "42"
        assert (await sandbox.run_code("1 + 1")).text == "2"  # Python's default context, beside it
        context = await sandbox.create_code_context(language="javascript", cwd="/tmp")
        assert (await sandbox.run_code("typeof n + ' ' + process.cwd()", context=context)).text == "'undefined /tmp'"
        failed = await sandbox.run_code("console.error('oops'); null.x", context=context)
        assert failed.error is not None and failed.error.name == "TypeError" and failed.logs.stderr == ["oops\n"]
        heard: list[float] = []
        code = "(async () => { console.log('a'); await new Promise(r => setTimeout(r, 600)); console.log('b'); return 7 })()"
        late = await sandbox.run_code(code, context=context, on_stdout=lambda _: heard.append(anyio.current_time()))
        assert (late.text, late.logs.stdout) == ("7", ["a\n", "b\n"]) and heard[1] - heard[0] > 0.4
        with pytest.raises(e2b.SandboxException, match="offers python, javascript"):
            await sandbox.run_code("puts 1", language="ruby")

