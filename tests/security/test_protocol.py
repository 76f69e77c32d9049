"""Odd bytes in requests and odd behaviour on descriptors are the code's own business: a typed
verdict (``error`` where the code cannot run), never ``infra_error``, never an exception the
caller did not cause, and the sandbox keeps working."""

from __future__ import annotations

import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import SandboxError
from gem_sandbox.sandbox.result import ExecResult
from tests.security.harness import S, Context, case

pytestmark = pytest.mark.anyio

SURROGATE = b"\xff".decode("utf-8", "surrogateescape")  # '\udcff'
TEN_MB = 10 * 1024 * 1024


def _said(text: str):
    def check(result: ExecResult) -> None:
        assert result.stdout == text, f"stdout {result.stdout!r}, expected {text!r}: {result!r}"

    return check


LARGE = [
    case(
        "ten_megabyte_line_of_python",
        "python",
        "x = '" + "a" * TEN_MB + "'\nprint(len(x))",
        S.OK,
        expect=_said(f"{TEN_MB}\n"),
        timeout=5.0,
    ),
    case(
        "ten_megabyte_comment_in_bash",
        "bash",
        "# " + "b" * TEN_MB + "\necho done",
        S.OK,
        expect=_said("done\n"),
        timeout=5.0,
    ),
]


@pytest.mark.parametrize("case", LARGE)
async def test_huge_sources_run_normally(harness, case):
    await harness.verify(case)


NULS = [
    case("nul_byte_in_python_code", "python", "print(1)\0print(2)", S.ERROR),
    case("nul_byte_in_bash_code", "bash", "echo a\0echo b", S.ERROR),
    case("nul_byte_in_a_kernel_cell", "kernel", "x = 1\0", S.ERROR),
    case("nul_byte_in_a_shell_command", "shell", "echo a\0b", S.ERROR),
]


@pytest.mark.parametrize("case", NULS)
async def test_nul_bytes_in_code_give_an_error_verdict(harness, case):
    await harness.verify(case)


SURROGATES = [
    case("lone_surrogate_in_a_python_comment", "python", f"print('fine') # {SURROGATE}", (S.OK, S.ERROR)),
    case("lone_surrogate_in_a_python_string", "python", f"print(len('{SURROGATE}'))", (S.OK, S.ERROR)),
    case("lone_surrogate_in_bash", "bash", f"echo '{SURROGATE}' | od -c | head -1", (S.OK, S.ERROR)),
    case("lone_surrogate_in_a_kernel_cell", "kernel", f"s = '{SURROGATE}'\nprint(len(s))", (S.OK, S.ERROR)),
    case("lone_surrogate_in_a_shell_command", "shell", f"echo '{SURROGATE}' | wc -c", (S.OK, S.ERROR)),
    case("unpaired_high_surrogate_in_python", "python", "print(len('\ud800'))", (S.OK, S.ERROR)),
]


@pytest.mark.parametrize("case", SURROGATES)
async def test_non_utf8_source_gets_a_typed_verdict(harness, case):
    await harness.verify(case)


async def _surrogate_stdin(sb: Sandbox, ctx: Context) -> ExecResult:
    return await sb.run("import sys; print(len(sys.stdin.buffer.read()))", stdin=f"a{SURROGATE}b", timeout=2)


async def _nul_stdin(sb: Sandbox, ctx: Context) -> ExecResult:
    result = await sb.run("import sys; print(len(sys.stdin.buffer.read()))", stdin=b"\0" * 10 + b"\xff", timeout=2)
    assert result.stdout == "11\n", f"{result!r}"
    return result


async def _nul_env(sb: Sandbox, ctx: Context) -> ExecResult:
    return await sb.run("print(1)", env={"GEM_X": "a\0b"}, timeout=2)


INPUTS = [
    case("lone_surrogate_in_stdin_text", "action", _surrogate_stdin, (S.OK, S.ERROR), raises=(SandboxError,)),
    case("nul_and_invalid_bytes_in_stdin", "action", _nul_stdin, S.OK),
    case("nul_byte_in_an_env_value", "action", _nul_env, S.ERROR, raises=(SandboxError,)),
]


@pytest.mark.parametrize("case", INPUTS)
async def test_odd_bytes_in_stdin_and_env_give_a_typed_answer(harness, case):
    await harness.verify(case)


DESCRIPTORS = [
    case(
        "closes_every_fd_then_exits_1",
        "python",
        "import os\nos.closerange(0, 65536)\nos._exit(1)",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "closes_every_fd_then_raises",
        "python",
        "import os\nos.closerange(0, 65536)\nraise AssertionError('tests failed')",
        S.ERROR,
    ),
    case(
        "garbage_on_every_inherited_fd_then_exit_1",
        "python",
        """
        import os
        junk = b'\\xff\\xff\\xff\\xff' + os.urandom(8192) + b'\\x00\\x00\\x00\\x05{"id"'
        for fd in range(256):
            try:
                os.write(fd, junk)
            except OSError:
                pass
        os._exit(1)
        """,
        S.ERROR,
        exit_code=1,
    ),
    case(
        "bash_closes_every_fd_then_exits_1",
        "bash",
        "for fd in $(seq 0 255); do eval \"exec $fd>&-\"; done 2>/dev/null\nexit 1",
        S.ERROR,
        exit_code=1,
    ),
    case(
        "kernel_cell_closes_every_fd",
        "kernel",
        "import os\nos.closerange(0, 65536)",
        (S.OK, S.ERROR, S.KILLED),
    ),
    case(
        "kernel_cell_exits_its_process",
        "kernel",
        "import os\nos._exit(0)",
        (S.OK, S.ERROR, S.KILLED),
    ),
    case(
        "shell_command_exits_the_session",
        "shell",
        "exit 7",
        (S.ERROR, S.KILLED),
    ),
    case(
        "shell_command_closes_its_status_fd",
        "shell",
        "exec 3>&- 4<&-; false",
        (S.ERROR, S.KILLED),
    ),
]


@pytest.mark.parametrize("case", DESCRIPTORS)
async def test_closed_or_garbled_descriptors_give_a_typed_verdict(harness, case):
    await harness.verify(case)
