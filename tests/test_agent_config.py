"""The agent's command line (agent/config.py): what a backend writes, the agent reads back;
a bad option stops it with status 2 and says which."""

from __future__ import annotations

import os

import pytest

from gem_sandbox import agent
from gem_sandbox.agent.config import OPTIONS, parse_args


def test_what_a_backend_writes_the_agent_reads_back():
    argv = agent.command(
        "python3",
        workdir="/w",
        tmpdir="/t",
        scratch=("/dev/shm", "/dev/mqueue"),
        uid_base=200000,
        uid_count=16,
        nproc=128,
        threads=2,
        memory_mb=512,
        stream_fd=7,
        base64=True,
        log_fd=9,
        log_level="info",
    )
    config = parse_args(argv[argv.index("gem_agent") + 1 :])
    assert (config.workdir, config.tmpdir, config.scratch) == ("/w", "/t", ["/dev/shm", "/dev/mqueue"])
    assert (config.uid_base, config.uid_count, config.gid) == (200000, 16, 200000)
    assert (config.nproc, config.threads, config.memory_mb) == (128, 2, 512)
    assert (config.stream_fd, config.base64, config.log_fd, config.log_level) == (7, True, 9, "info")


def test_defaults_serve_on_stdio_in_token_mode_without_limits():
    config = parse_args([])
    assert (config.workdir, config.tmpdir, config.scratch) == ("/work", "/tmp", [])
    assert (config.uid_base, config.gid, config.uid_count, config.uid_mode) == (None, None, 64, False)
    assert (config.nproc, config.memory_mb, config.oom_counter, config.stream_fd) == (None, None, None, None)
    assert (config.threads, config.base64, config.log_fd, config.log_level) == (1, False, None, "warning")


def test_uid_mode_needs_a_uid_range_and_root():
    assert parse_args(["--uid-base", "300000"]).uid_mode is (os.geteuid() == 0)
    assert parse_args(["--gid", "5"]).uid_mode is False


def test_each_parse_has_its_own_scratch_list():
    parse_args(["--scratch", "/a"])
    assert parse_args([]).scratch == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--threads", "two"], "--threads: invalid int value: 'two'"),
        (["--uid-count", "0"], "--uid-count must be at least 1"),
        (["--no-such-option"], "option --no-such-option not recognized"),
        (["--workdir"], "option --workdir requires argument"),
        (["stray"], "unrecognized arguments: stray"),
    ],
)
def test_a_bad_command_line_exits_2_naming_the_problem(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_help_lists_every_option_and_exits_0(capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(["--help"])
    assert stopped.value.code == 0
    shown = capsys.readouterr().out
    for name, *_ in OPTIONS:
        assert f"--{name}" in shown
