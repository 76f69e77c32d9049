"""examples/gem_drop_in.py: GEM-API code (ROLL's env manager, GEM's examples) on gem-sandbox."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("gem", reason="gem-llm is in the test extra")


def load_example() -> ModuleType:
    path = Path(__file__).parent.parent / "examples" / "gem_drop_in.py"
    spec = importlib.util.spec_from_file_location("gem_drop_in", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_episode_through_gems_api_earns_the_tool_and_the_answer() -> None:
    # 0.05 for using the tool, 0.25 for its success (GEM's python_tool), 1.0 for the answer
    # the sandbox computed.
    assert load_example().solve_with_python() == pytest.approx(1.3)


def test_gems_own_run_python_runs_in_a_sandbox_while_installed() -> None:
    from gem.utils import sandbox as gem_module

    example = load_example()
    original = gem_module.run_python
    assert example.run_gem_code_in_sandboxes() == (True, "42\n", "")
    assert gem_module.run_python is original  # uninstalled again
