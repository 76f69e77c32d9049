"""The ``gem-sandbox`` command answers what users get wrong in one line, with the fix.

Each case runs the real command in a subprocess (``python -m gem_sandbox.cli``) from an empty
directory, with no ``GEM_SANDBOX_*`` variable but the ones the case sets.
"""

from __future__ import annotations

import errno
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import gem_sandbox
from gem_sandbox import cli
from gem_sandbox.cli.demo import UNISOLATED_WARNING
from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.errors import BackendNotAvailable

NO_DAEMON = {"DOCKER_HOST": "unix:///nonexistent.sock"}
# Runs the CLI with a top-level package import failing as if it were not installed.
BLOCKING = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == sys.argv[1]:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from gem_sandbox.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run(cwd: Path, *args: str, env: dict[str, str] | None = None, code: str | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(defaults.ENV_PREFIX)}
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "gem_sandbox.cli"]
    return subprocess.run(
        [*argv, *args], env={**clean, **(env or {})}, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr, after checking there is exactly one and it is an error."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gem-sandbox: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("group", [[], ["images"], ["search"]])
def test_a_command_without_a_subcommand_prints_its_help_and_exits_2(tmp_path: Path, group: list[str]) -> None:
    result = run(tmp_path, *group)
    assert result.returncode == 2 and result.stderr == ""
    assert result.stdout.startswith(f"usage: {' '.join(['gem-sandbox', *group])} ")
    assert "commands:" in result.stdout


def test_version_is_the_installed_one(tmp_path: Path) -> None:
    result = run(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout == f"gem-sandbox {gem_sandbox.__version__}\n"
    assert gem_sandbox.__version__ == importlib.metadata.version("gem-sandbox")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--log-level", "LOUD", "envs"], "--log-level"),
        (["nosuch"], "nosuch"),
        (["demo", "--episodes", "0"], "--episodes"),
        (["search", "serve", "--port", "99999"], "--port"),
    ],
)
def test_a_bad_command_line_is_one_usage_line(tmp_path: Path, args: list[str], named: str) -> None:
    result = run(tmp_path, *args)
    assert result.returncode == 2 and result.stdout == ""
    line = error_line(result)
    assert named in line and "--help" in line


def test_images_build_without_a_daemon_is_one_line_and_verbose_shows_the_traceback(tmp_path: Path) -> None:
    pytest.importorskip("docker")
    result = run(tmp_path, "images", "build", env=NO_DAEMON)
    assert result.returncode == 1
    line = error_line(result)
    assert "no Docker daemon answers at unix:///nonexistent.sock" in line and "DOCKER_HOST" in line

    verbose = run(tmp_path, "--verbose", "images", "build", env=NO_DAEMON)
    assert verbose.returncode == 1
    assert verbose.stderr.startswith("Traceback (most recent call last):")
    assert verbose.stderr.splitlines()[-1] == line


def test_search_index_of_a_missing_corpus_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result = run(tmp_path, "search", "index", str(missing))
    assert result.returncode == 1
    assert error_line(result) == f"gem-sandbox: error: no such file or directory: {missing}; check the path"
    assert list(tmp_path.iterdir()) == []  # nor a half-built index left behind


@pytest.fixture
def index(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "1", "contents": "Paris\\nThe capital of France."}\n')
    result = run(tmp_path, "search", "index", str(corpus), "--db", str(tmp_path / "index.sqlite3"))
    assert result.returncode == 0, result.stderr
    return tmp_path / "index.sqlite3"


def test_search_serve_on_a_port_in_use_says_so(tmp_path: Path, index: Path) -> None:
    pytest.importorskip("aiohttp")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(tmp_path, "search", "serve", "--db", str(index), "--port", str(port))
    assert result.returncode == 1
    line = error_line(result)
    assert "port is in use" in line and str(port) in line and "--port" in line


def test_an_interrupt_exits_130_quietly(tmp_path: Path, index: Path) -> None:
    pytest.importorskip("aiohttp")
    argv = [sys.executable, "-m", "gem_sandbox.cli", "search", "serve", "--db", str(index), "--port", "0"]
    # A shell that starts a job in the background has it ignore SIGINT, and Python keeps an
    # inherited "ignored": the server gets the default disposition a terminal would give it.
    with subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as server:
        try:
            assert server.stdout is not None and "retrieval server" in server.stdout.readline()
            server.send_signal(signal.SIGINT)
            _, stderr = server.communicate(timeout=30)
        finally:
            server.kill()  # a failed assertion must not leave the with-block waiting forever
    assert server.returncode == 130 and stderr == ""


@pytest.mark.parametrize(
    ("module", "args", "extra"),
    [
        ("aiohttp", ["search", "serve"], "service"),
        ("docker", ["images", "build"], "docker"),
        ("tenacity", ["demo", "--backend", "docker"], "docker"),
    ],
)
def test_a_missing_extra_is_named_with_its_install_command(
    tmp_path: Path, module: str, args: list[str], extra: str
) -> None:
    result = run(tmp_path, module, *args, code=BLOCKING)
    assert result.returncode == 1 and result.stdout == ""
    line = error_line(result)
    assert module in line and f"pip install 'gem-sandbox[{extra}]'" in line


def test_an_unknown_backend_fails_before_anything_plays(tmp_path: Path) -> None:
    result = run(tmp_path, "demo", env={"GEM_SANDBOX_BACKEND": "bogus"})
    assert result.returncode == 1 and result.stdout == ""
    line = error_line(result)
    assert "'bogus'" in line and all(name in line for name in ("auto", *defaults.BACKENDS))


def test_a_bad_setting_fails_before_anything_plays(tmp_path: Path) -> None:
    result = run(tmp_path, "demo", env={"GEM_SANDBOX_MAX_SIZE": "abc"})
    assert result.returncode == 1 and result.stdout == ""
    line = error_line(result)
    assert "GEM_SANDBOX_MAX_SIZE" in line and "'abc'" in line


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--backend", "process"], {}), ([], {"GEM_SANDBOX_BACKEND": "process"})],
    ids=["flag", "variable"],
)
def test_the_process_backend_warns_that_it_is_not_isolated(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    result = run(tmp_path, "demo", *args, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("== sandbox backend: process\n")
    assert result.stderr.splitlines()[0] == UNISOLATED_WARNING


def test_doctor_says_which_backend_auto_picks_here(tmp_path: Path) -> None:
    try:
        expected = defaults.resolve_backend_name("auto")
    except BackendNotAvailable as exc:
        pytest.skip(f"no isolating backend runs here: {exc}")
    result = run(tmp_path, "doctor")
    assert result.returncode == 0, result.stdout
    last = result.stdout.splitlines()[-1].split()
    assert last[:5] == ["ok", "backend", "auto", "->", expected]


def test_a_misspelt_variable_is_one_warning_line_naming_the_setting(tmp_path: Path) -> None:
    result = run(tmp_path, "doctor", env={"GEM_SANDBOX_MAX_SZE": "3"})
    assert result.stderr.splitlines() == [
        "gem-sandbox: warning: ignoring GEM_SANDBOX_MAX_SZE: no gem-sandbox setting has that name; "
        "did you mean GEM_SANDBOX_MAX_SIZE? (see docs/configuration.md)"
    ]
    assert "!!  variables" in result.stdout


def test_doctor_fails_when_the_named_backend_cannot_run(tmp_path: Path) -> None:
    result = run(tmp_path, "doctor", env={"GEM_SANDBOX_BACKEND": "docker", **NO_DAEMON})
    assert result.returncode == 1
    backend = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["backend"])
    assert backend.split()[:4] == ["!!", "backend", "docker", "->"]


def test_the_library_never_configures_the_root_logger(tmp_path: Path) -> None:
    """Only entry points may: the CLI's main() and the in-sandbox agent's ``__main__``."""
    code = (
        "import logging, pkgutil, importlib, gem_sandbox\n"
        "for m in pkgutil.walk_packages(gem_sandbox.__path__, 'gem_sandbox.'):\n"
        "    if m.name.endswith('.__main__'):  # entry points: the agent's, the CLI's\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except ModuleNotFoundError as e:  # a trainer adapter whose framework is not installed\n"
        "        if not m.name.startswith('gem_sandbox.integrations.') or e.name.startswith('gem_sandbox'):\n"
        "            raise\n"
        "assert not logging.getLogger().handlers, logging.getLogger().handlers\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (OSError(errno.EADDRINUSE, "address already in use"), "the port is in use (address already in use); stop"),
        (PermissionError(errno.EACCES, "Permission denied", "/root/x"), "permission denied: /root/x; run as"),
        (ExceptionGroup("g", [FileNotFoundError(errno.ENOENT, "No such file", "/x")]), "no such file or directory: /x;"),
        (ValueError("bad input; use good input"), "bad input; use good input"),
    ],
)
def test_the_errors_users_cause_are_explained(exc: Exception, expected: str) -> None:
    assert (cli.explain(exc) or "").startswith(expected)


@pytest.mark.parametrize("exc", [KeyError("x"), ModuleNotFoundError("No module named 'numpy'", name="numpy")])
def test_anything_else_is_a_bug_with_its_traceback(exc: Exception, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.explain(exc) is None
    try:
        raise exc
    except Exception as raised:
        assert cli.report(raised, verbose=False) == 1
    stderr = capsys.readouterr().err
    assert stderr.startswith("Traceback (most recent call last):")
    assert stderr.splitlines()[-1].endswith("a bug in gem-sandbox; please report it with the traceback above")
