"""Terminal tasks read from disk, in Terminal-Bench's layout or in Harbor's.

Terminal-Bench (``task.yaml`` beside ``Dockerfile``, ``run-tests.sh``, ``solution.sh`` and
``tests/``)::

    task.yaml        instruction, difficulty, max_agent_timeout_sec, max_test_timeout_sec, ...
    Dockerfile       the task's image
    solution.sh      the reference solution
    tests/           pytest files (test_outputs.py), run after the episode

Harbor (its successor)::

    instruction.md   the instruction
    task.toml        [metadata], [agent] timeout_sec, [verifier] timeout_sec, [environment]
    environment/     Dockerfile and its build context
    solution/        solve.sh, the reference solution
    tests/           test.sh, which writes the reward to /logs/verifier/reward.txt (or .json)

A task runs on the project's sandbox image when its Dockerfile builds ``FROM
gem-sandbox/sandbox`` and a ``setup.sh`` sits beside it: the script then runs in the work dir
(``/app``) as the episode starts, as the Dockerfile's ``RUN`` would at build time. Any other
Dockerfile means the task needs an image of its own (:attr:`TerminalTask.own_image`), built
from it by :mod:`.images`.

The tests are read into memory here, on the host, and go into a sandbox only after the episode:
nothing the model does can see, edit or remove them.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

StrPath = str | os.PathLike[str]
Format = Literal["terminal-bench", "harbor"]

PROJECT_IMAGE = "gem-sandbox/sandbox"
MAX_TEST_BYTES = 4 << 20  # a task's tests travel inside one harness cell
DEFAULT_AGENT_TIMEOUT = 600.0
DEFAULT_TEST_TIMEOUT = 120.0
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)


class TaskError(ValueError):
    """A task directory that is not a readable Terminal-Bench or Harbor task."""


@dataclass(frozen=True)
class TerminalTask:
    """One task, everything the env needs from its directory."""

    name: str
    format: Format
    instruction: str
    tests: Mapping[str, bytes]  # path under tests/ -> content
    setup: str | None  # setup.sh, for tasks on the project's image
    solution: str | None  # the reference solution, a bash script
    dockerfile: Path | None
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT
    test_timeout: float = DEFAULT_TEST_TIMEOUT
    test_weights: Mapping[str, float] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def own_image(self) -> bool:
        """The task builds an image of its own instead of running on the project's."""
        if self.dockerfile is None:
            return False
        bases = _FROM.findall(self.dockerfile.read_text(encoding="utf-8"))
        on_project = bool(bases) and all(base.split(":")[0] == PROJECT_IMAGE for base in bases)
        return not (on_project and self.setup is not None)

    @property
    def difficulty(self) -> str:
        return str(self.metadata.get("difficulty", "unknown"))


def load_task(path: StrPath) -> TerminalTask:
    """The task in directory ``path``, in whichever of the two layouts it has."""
    root = Path(path)
    if (root / "task.toml").is_file():
        return _load_harbor(root)
    if (root / "task.yaml").is_file():
        return _load_terminal_bench(root)
    raise TaskError(f"{root} is not a task: it has neither task.toml (Harbor) nor task.yaml (Terminal-Bench)")


def load_tasks(path: StrPath) -> list[TerminalTask]:
    """The task at ``path``, or every task directory directly inside it, by name."""
    root = Path(path)
    if not root.is_dir():
        raise TaskError(f"{root} is not a directory of terminal tasks")
    if (root / "task.toml").is_file() or (root / "task.yaml").is_file():
        return [load_task(root)]
    tasks = [load_task(child) for child in sorted(root.iterdir()) if _is_task(child)]
    if not tasks:
        raise TaskError(f"no Terminal-Bench or Harbor task in {root}")
    return tasks


def shipped_tasks() -> list[TerminalTask]:
    """The tasks that ship with gem-sandbox (``envs/terminal/tasks/``)."""
    root = files(__package__).joinpath("tasks")
    return load_tasks(Path(str(root)))


def _is_task(path: Path) -> bool:
    return path.is_dir() and ((path / "task.toml").is_file() or (path / "task.yaml").is_file())


def _load_terminal_bench(root: Path) -> TerminalTask:
    try:
        import yaml
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "Terminal-Bench tasks are YAML: pip install 'gem-sandbox[terminal]'", name="yaml"
        ) from None
    try:
        config = yaml.safe_load((root / "task.yaml").read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise TaskError(f"{root / 'task.yaml'}: {exc}") from None
    if not isinstance(config, dict) or not isinstance(config.get("instruction"), str):
        raise TaskError(f"{root / 'task.yaml'} has no instruction")
    weights = config.get("test_weights") or {}
    return TerminalTask(
        name=root.name,
        format="terminal-bench",
        instruction=config["instruction"].strip() + "\n",
        tests=_read_tests(root / "tests"),
        setup=_read_optional(root / "setup.sh"),
        solution=_read_solution(root / "solution.sh", root / "solution.yaml"),
        dockerfile=_existing(root / "Dockerfile"),
        agent_timeout=float(config.get("max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT)),
        test_timeout=float(config.get("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT)),
        test_weights={str(k): float(v) for k, v in weights.items()},
        metadata={k: v for k, v in config.items() if k in ("difficulty", "category", "tags", "author_email")},
    )


def _load_harbor(root: Path) -> TerminalTask:
    try:
        config = tomllib.loads((root / "task.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{root / 'task.toml'}: {exc}") from None
    instruction = _read_optional(root / "instruction.md")
    if instruction is None:
        raise TaskError(f"{root} has task.toml but no instruction.md")
    tests = _read_tests(root / "tests")
    if "test.sh" not in tests:
        raise TaskError(f"{root / 'tests'} has no test.sh, Harbor's verifier entry point")
    environment = root / "environment"
    return TerminalTask(
        name=root.name,
        format="harbor",
        instruction=instruction.strip() + "\n",
        tests=tests,
        setup=_read_optional(environment / "setup.sh"),
        solution=_read_optional(root / "solution" / "solve.sh"),
        dockerfile=_existing(environment / "Dockerfile"),
        agent_timeout=float(_section(config, "agent").get("timeout_sec", DEFAULT_AGENT_TIMEOUT)),
        test_timeout=float(_section(config, "verifier").get("timeout_sec", DEFAULT_TEST_TIMEOUT)),
        metadata=_section(config, "metadata"),
    )


def _section(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    section = config.get(name, {})
    return section if isinstance(section, dict) else {}


def _read_tests(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        raise TaskError(f"{directory.parent} has no tests/ directory")
    tests: dict[str, bytes] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            tests[path.relative_to(directory).as_posix()] = path.read_bytes()
    if sum(map(len, tests.values())) > MAX_TEST_BYTES:
        raise TaskError(f"{directory} holds over {MAX_TEST_BYTES >> 20} MiB of tests")
    return tests


def _read_solution(script: Path, commands: Path) -> str | None:
    """``solution.sh``, or Terminal-Bench's ``solution.yaml`` (a list of ``command:`` entries)
    as one script."""
    if script.is_file():
        return script.read_text(encoding="utf-8")
    if not commands.is_file():
        return None
    import yaml

    entries = yaml.safe_load(commands.read_text(encoding="utf-8")) or []
    return "".join(f"{entry['command']}\n" for entry in _commands(entries))


def _commands(entries: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("command"), str):
            yield entry


def _read_optional(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _existing(path: Path) -> Path | None:
    return path if path.is_file() else None
