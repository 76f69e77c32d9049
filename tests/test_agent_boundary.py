"""The agent's boundary with the host: the host imports only the agent modules marked as
shared (``HOST_SHARED``), and the agent, which runs inside sandboxes, imports nothing of the
host's package."""

from __future__ import annotations

import ast
from pathlib import Path

import gem_sandbox
from gem_sandbox import agent

PACKAGE = Path(gem_sandbox.__file__).parent
AGENT = PACKAGE / "agent"


def _modules_imported(path: Path) -> set[str]:
    """Every module ``path`` imports by absolute name, ``from x import y`` counted as both
    ``x`` and ``x.y`` (``y`` may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _agent_modules_used_by_host() -> dict[str, set[str]]:
    """Agent module -> the host files that import it."""
    used: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if AGENT in path.parents:
            continue
        for name in _modules_imported(path):
            parts = name.split(".")
            if parts[:2] == ["gem_sandbox", "agent"] and len(parts) > 2:
                used.setdefault(parts[2], set()).add(str(path.relative_to(PACKAGE)))
    return used


# Scanned once, at collection, while the test process has one thread: CPython 3.11 keeps
# ast.parse's recursion counter in shared module state, so a parse racing another thread's
# (3.11's tracebacks parse source to draw their carets) fails with "AST constructor recursion
# depth mismatch" (python/cpython#106905).
HOST_USES = _agent_modules_used_by_host()
AGENT_IMPORTS = {path.name: _modules_imported(path) for path in AGENT.rglob("*.py")}


def test_the_shared_agent_modules_exist():
    assert agent.HOST_SHARED and all((AGENT / f"{name}.py").is_file() for name in agent.HOST_SHARED)


def test_the_host_imports_no_agent_module_but_the_shared_ones():
    # HOST_USES also holds names from the package itself, as agent.command
    modules = {module: files for module, files in HOST_USES.items() if (AGENT / f"{module}.py").is_file()}
    private = {module: files for module, files in modules.items() if module not in agent.HOST_SHARED}
    assert private == {}, f"host modules import agent internals: {private}"


def test_the_host_does_import_the_shared_protocol():
    assert "sandbox/framing.py" in HOST_USES["protocol"]


def test_the_agent_imports_nothing_of_the_host_package():
    for name, imported in AGENT_IMPORTS.items():
        host = {module for module in imported if module.split(".")[0] == "gem_sandbox"}
        assert host == set(), f"{name} imports {host}: the agent runs inside sandboxes, alone"
