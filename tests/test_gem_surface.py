"""GEM's import surface: every public module path and name of gem-llm 0.1.0 resolves under
``gem_sandbox``, so that replacing ``gem`` with ``gem_sandbox`` in import lines migrates code.

gem-llm's source is read, not imported (importing it registers every env and imports
reasoning-gym): each module's public names are its ``__all__``, else the names its top level
defines (classes, functions, assignments; not what it imports). The omissions below are
deliberate, each with its reason; ``KNOWN_GAPS`` lists the differences in classes' methods or
constructor parameters that remain, in code other people own.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import subprocess
import sys
import typing
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

GEM_SPEC = importlib.util.find_spec("gem")
if GEM_SPEC is None or GEM_SPEC.origin is None:
    pytest.skip("gem-llm is not installed (pip install 'gem-sandbox[gem]')", allow_module_level=True)
GEM_ROOT = Path(GEM_SPEC.origin).parent

#: gem-llm modules with no counterpart here, and why.
OMITTED_MODULES = {
    # GEM's own sympy/pylatexenc grader with SIGALRM timeouts (main thread only). The math envs
    # here grade with math-verify in a worker process; another grader under GEM's names would
    # change what they mean (and gem-llm's module does not import without pylatexenc).
    "gem.utils.math_grader": "a different grader",
    # No visual (image) math env in the catalogue.
    "gem.envs.math_visual_env": "no counterpart env",
    # Needs the external MCPMark package and its services.
    "gem.envs.mcpmark": "external benchmark",
    # Drives the host's Docker through terminal_bench. The catalogue's TerminalEnv
    # (gem_sandbox_envs.terminal) runs Terminal-Bench tasks in sandboxes, with a constructor
    # of its own; executor and reward are docker_env's internals.
    "gem.envs.terminal.docker_env": "host Docker",
    "gem.envs.terminal.executor": "host Docker",
    "gem.envs.terminal.reward": "host Docker",
    # GEM's level generator, internal to its SokobanEnv; the catalogue's generates its own.
    "gem.envs.game_env.sokoban.utils": "internal",
    # GEM's search servers (Google and SerpAPI keys, faiss); gem_sandbox.search serves an
    # embedded index instead, and SearchTool speaks GEM's retrieval protocol to any server.
    "gem.tools.search_engine.google_search_server": "search server",
    "gem.tools.search_engine.serp_search_server": "search server",
    "gem.tools.search_engine.retrieval_server": "search server",
    # A demo MCP server of GEM's examples.
    "gem.tools.mcp_server.time_mcp": "demo server",
}

#: Public names of kept modules that are left out, and why.
OMITTED_NAMES = {
    ("gem.envs", "data_names"): "a loop variable of GEM's registration code",
    ("gem.envs.math_env", "verify_fn"): "GEM's grader (gem.utils.math_grader) bound to its MathEnv",
    ("gem.envs.qa_env", "apply_prompt"): "GEM's dataset preprocessing; the catalogue's QaEnv words its prompt itself",
    ("gem.envs.game_env.sokoban.sokoban", "CHANGE_COORDINATES"): "the move table internal to GEM's SokobanEnv",
    ("gem.utils.constants", "BASE_IMPORTS"): "the prelude GEM's run_python prepends; gem_sandbox.tools.python_code_tool has it",
    ("gem.utils.constants", "BASE_LEETCODE_IMPORTS"): "as BASE_IMPORTS",
    # gem_sandbox.utils.sandbox.run_python runs code in a sandbox; GEM's host run and the
    # substring blacklist in front of it have no counterpart (the sandbox is the isolation).
    ("gem.utils.sandbox", "subprocess_run"): "unsafe host execution",
    ("gem.utils.sandbox", "check_forbidden_imports"): "a substring blacklist, no isolation",
    ("gem.utils.sandbox", "CLI_ARG_SIZE_LIMIT"): "when the host run passes code in a temp file; a sandbox run has no such limit",
    ("gem.utils.sandbox", "ERROR_MSG_PREFIX"): "defined by GEM's module and used nowhere",
}
#: Names no module exports as API: module loggers.
NOT_API = {"logger"}

#: (module, class) -> what of GEM's class is missing here, and why it stays so for now.
KNOWN_GAPS = {
    # The catalogue's games (gem_sandbox_envs.games, not this library): the board suffix is
    # ``suffix()``, and GEM's internal-reward and sampling helpers have no counterpart.
    # One server per tool, one session, no retries (see gem_sandbox.tools.mcp_tool).
    ("gem.tools.mcp_tool", "MCPTool"): {
        "log_handler", "progress_handler", "sampling_handler", "max_retries", "delay_between_retries",
        "num_workers", "from_multi_server", "<positional order>",
    },
    ("gem.envs.game_env.hangman", "HangmanEnv"): {
        "get_current_success_internal_reward", "sample_random_word", "sample_random_letter",
    },
    ("gem.envs.game_env.mastermind", "MastermindEnv"): {"get_current_success_internal_reward"},
    ("gem.envs.game_env.wordle", "WordleEnv"): {"get_current_success_internal_reward"},
    ("gem.envs.game_env.sudoku", "SudokuEnv"): {"is_safe"},
    # The catalogue's dataset envs score in their own way (math-verify in a worker process;
    # exact match with the F1 beside it), not through GEM's static check_correct.
    ("gem.envs.math_env", "MathEnv"): {"check_correct"},
    ("gem.envs.qa_env", "QaEnv"): {"check_correct"},
    # gem_sandbox.tools (owned elsewhere): tools have no worker pool (calls are concurrent on
    # the runtime), and SearchTool's positional order is (topk, timeout, search_url, index).
    ("gem.tools.search_tool", "SearchTool"): {"num_workers", "<positional order>"},
    # VectorEnv's first positional parameter takes GEM's env_ids or envs already made
    # (``VectorEnv(env_ids, env_fns)``, ``VectorEnv(env_ids=..., env_fns=...)`` both work).
    ("gem.vector.vector_env", "VectorEnv"): {"<positional order>"},
}


@dataclass(frozen=True)
class GemModule:
    name: str
    path: Path
    names: tuple[str, ...]
    classes: dict[str, ast.ClassDef]
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    literals: dict[str, object]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(GEM_ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _read(path: Path) -> GemModule:
    with warnings.catch_warnings():  # gem-llm's sources hold invalid escapes
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = ast.parse(path.read_text(encoding="utf-8"))
    defined: list[str] = []
    exported: list[str] | None = None
    classes, functions, literals = {}, {}, {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defined.append(node.name)
            classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.append(node.name)
            functions[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                    if name == "__all__":
                        exported = list(ast.literal_eval(node.value))
                    defined.append(name)
                    try:
                        literals[name] = ast.literal_eval(node.value)
                    except (ValueError, TypeError, SyntaxError):
                        pass
    names = exported if exported is not None else [n for n in defined if not n.startswith("_")]
    return GemModule(_module_name(path), path, tuple(dict.fromkeys(names)), classes, functions, literals)


GEM_MODULES = sorted((_read(p) for p in GEM_ROOT.rglob("*.py") if "__pycache__" not in p.parts), key=lambda m: m.name)
KEPT = [m for m in GEM_MODULES if m.name not in OMITTED_MODULES]
#: GEM's namespace packages (directories without an __init__.py) that hold kept modules.
NAMESPACES = sorted(
    {".".join(m.name.split(".")[:i]) for m in KEPT for i in range(2, len(m.name.split(".")))}
    - {m.name for m in GEM_MODULES}
)


def ours(gem_name: str) -> str:
    return "gem_sandbox" + gem_name.removeprefix("gem")


def test_the_walk_found_gems_modules_and_every_omission_is_one_of_them():
    names = {m.name for m in GEM_MODULES}
    assert {"gem", "gem.core", "gem.vector.sync_vector_env", "gem.wrappers.wrapper_factory"} <= names
    assert set(OMITTED_MODULES) <= names, set(OMITTED_MODULES) - names
    by_name = {m.name: m for m in GEM_MODULES}
    for module, name in OMITTED_NAMES:
        assert name in by_name[module].names, (module, name)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_gems_namespace_packages_exist(namespace: str):
    importlib.import_module(ours(namespace))


@pytest.mark.parametrize("module", KEPT, ids=lambda m: m.name)
def test_every_public_name_resolves_with_the_same_kind(module: GemModule):
    mod = importlib.import_module(ours(module.name))
    for name in module.names:
        if name in NOT_API or (module.name, name) in OMITTED_NAMES:
            continue
        assert hasattr(mod, name), f"{ours(module.name)} has no {name!r} (gem-llm's {module.name} has)"
        value = getattr(mod, name)
        if name in module.classes:
            assert inspect.isclass(value), f"{ours(module.name)}.{name} is not a class"
        elif name in module.functions:
            assert callable(value), f"{ours(module.name)}.{name} is not callable"
        elif name in module.literals and module.literals[name] not in ({}, [], ()):  # an empty one is a registry
            expected = module.literals[name]
            if isinstance(value, (set, frozenset)):  # a membership table: GEM's list, a set here
                expected = set(expected)  # type: ignore[call-overload]
            assert value == expected, f"{ours(module.name)}.{name}: {value!r} != GEM's {expected!r}"


def _gem_params(init: ast.FunctionDef) -> tuple[list[str], list[str]]:
    positional = [a.arg for a in init.args.args[1:]]
    return positional, positional + [a.arg for a in init.args.kwonlyargs]


def _gaps(module: GemModule, cls_name: str) -> set[str]:
    """What of GEM's class ``cls_name`` our class lacks: public methods, constructor
    parameters, and ``<positional order>`` when GEM's positional parameters are not ours."""
    cls = getattr(importlib.import_module(ours(module.name)), cls_name)
    node = module.classes[cls_name]
    methods = {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    gaps = {name for name in methods if not name.startswith("_") and not hasattr(cls, name)}
    if "__init__" in methods:
        params = inspect.signature(cls).parameters
        positional, every = _gem_params(methods["__init__"])
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            gaps |= {name for name in every if name not in params}
        ordered = [p.name for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if ordered[: len(positional)] != positional:
            gaps.add("<positional order>")
    return gaps


def _kept(module: GemModule, name: str) -> bool:
    return name in module.names and name not in NOT_API and (module.name, name) not in OMITTED_NAMES


CLASSES = [(m, c) for m in KEPT for c in m.classes if _kept(m, c)]


@pytest.mark.parametrize(("module", "cls"), CLASSES, ids=[f"{m.name}.{c}" for m, c in CLASSES])
def test_classes_have_gems_methods_and_constructor_parameters(module: GemModule, cls: str):
    assert _gaps(module, cls) <= KNOWN_GAPS.get((module.name, cls), set())


FUNCTIONS = [(m, f) for m in KEPT for f in m.functions if _kept(m, f)]


@pytest.mark.parametrize(("module", "fn"), FUNCTIONS, ids=[f"{m.name}.{f}" for m, f in FUNCTIONS])
def test_functions_take_gems_parameters(module: GemModule, fn: str):
    node = module.functions[fn]
    ours_fn = getattr(importlib.import_module(ours(module.name)), fn)
    params = inspect.signature(ours_fn).parameters
    gem_positional = [a.arg for a in node.args.args]
    positional = [p.name for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert positional[: len(gem_positional)] == gem_positional
    assert {a.arg for a in node.args.kwonlyargs} <= set(params)


def test_env_modules_are_the_catalogues_classes():
    from gem_sandbox_envs.games.guess_the_number import GuessTheNumberEnv
    from gem_sandbox_envs.math.math_env import MathEnv

    from gem_sandbox.envs.game_env.guess_the_number import GuessTheNumberEnv as Ours
    from gem_sandbox.envs.math_env import MathEnv as OursMath

    assert Ours is GuessTheNumberEnv and OursMath is MathEnv
    assert "GuessTheNumberEnv" in dir(importlib.import_module("gem_sandbox.envs.game_env.guess_the_number"))
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        importlib.import_module("gem_sandbox.envs.math_env").Nope  # noqa: B018


def test_importing_gems_paths_imports_no_catalogue_env():
    """The env modules resolve their classes on first access, so the library's import stays
    free of the catalogue (its datasets and optional dependencies)."""
    modules = [ours(m.name) for m in KEPT if m.name.startswith("gem.envs")] + ["gem_sandbox.vector", "gem_sandbox.wrappers.wrapper_factory"]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "loaded = sorted(n for n in sys.modules if n.startswith('gem_sandbox_envs'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_typevars_stay_typevars():
    from gem_sandbox.core import ActType, ObsType
    from gem_sandbox.vector.vector_env import ArrayType
    from gem_sandbox.wrappers.observation_wrapper import WrapperObsType

    assert all(isinstance(t, typing.TypeVar) for t in (ActType, ObsType, ArrayType, WrapperObsType))
