"""examples/train_trl_grpo.py: TRL's GRPOTrainer trains a tiny model for three steps on rewards
from sandboxed code runs, and leaves nothing running.

Needs torch, transformers and trl (the ``trl`` extra, in the trainers venv); CI runs it there
and fails if it skipped. One training run serves every test in the module."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the GRPO example needs torch (pip install 'gem-sandbox[trl]')")
pytest.importorskip("trl", reason="the GRPO example needs trl (pip install 'gem-sandbox[trl]')")

from gem_sandbox.integrations.scoring import Scorer  # noqa: E402
from gem_sandbox.sync import SyncRuntime  # noqa: E402

pytestmark = [pytest.mark.trainer, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_trl_grpo.py"
STEPS = 3


def load_example():
    spec = importlib.util.spec_from_file_location("train_trl_grpo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through it
    spec.loader.exec_module(module)
    return module


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture(scope="module")
def example():
    return load_example()


@pytest.fixture(scope="module")
def run(example):
    before = set(descendants(os.getpid()))
    run = example.train(STEPS, seed=0)
    run.left_running = [p for p in descendants(os.getpid()) if p not in before]
    return run


def steps_logged(run) -> list[dict]:
    return [entry for entry in run.log_history if "loss" in entry]


def test_the_trainer_ran_every_step(run) -> None:
    assert run.steps == STEPS
    assert len(steps_logged(run)) == STEPS
    assert all(len(f.history) == STEPS for f in run.reward_funcs)  # one reward call per step


def test_the_logged_rewards_are_the_envs_scores_for_the_same_completions(run) -> None:
    """Each step's logged mean reward per function equals the mean of what a fresh Scorer
    gives the completions that function was handed that step."""
    with SyncRuntime("local", max_size=4) as runtime:
        for func in run.reward_funcs:
            scorer = func.scorer
            again = Scorer(scorer.env_id, runtime=runtime, wrappers=scorer.wrappers, **without_runtime(scorer.env_kwargs))
            for step, (entry, batch) in enumerate(zip(steps_logged(run), func.history, strict=True)):
                logged = entry[f"rewards/{func.__name__}/mean"]
                if not batch:  # no row of this env in the step: TRL logs NaN (None in log_history)
                    assert logged is None or math.isnan(logged), step
                    continue
                rescored = again.score_many([(text, seed) for seed, text, _ in batch])
                assert [s.reward for s in rescored] == [s.reward for _, _, s in batch], step
                mean = sum(s.reward for s in rescored) / len(rescored)
                assert logged == pytest.approx(mean, abs=1e-5), (func.__name__, step)


def without_runtime(kwargs: dict) -> dict:
    return {k: v for k, v in kwargs.items() if k != "runtime"}


def test_rewards_differed_within_a_step(run) -> None:
    assert any(entry["reward_std"] > 0 for entry in steps_logged(run))


def test_the_policy_weights_changed(run) -> None:
    assert run.weights_changed


def test_every_completion_that_ran_code_ran_it_in_a_sandbox(run) -> None:
    """A code answer is scored on a leased sandbox, a tool call runs on one: the runtime
    counts at least one lease per completion whose code ran (those without code earn the
    env's format reward, no run)."""
    ran = 0
    for func in run.reward_funcs:
        for batch in func.history:
            for _, _, scored in batch:
                if func.scorer.wrappers:
                    ran += scored.info.get("tool_use_counter", 0) > 0
                else:
                    ran += scored.status != "format_error"
    assert ran > 0
    assert run.sandbox_leases >= ran


def test_no_reward_was_an_infra_error(run) -> None:
    assert not [s for f in run.reward_funcs for batch in f.history for _, _, s in batch if s.infra_error]


def test_nothing_is_left_running_after_training(run) -> None:
    assert not [(pid, command_of(pid)) for pid in run.left_running if command_of(pid)]


def test_a_trainer_killed_mid_training_leaves_no_sandbox_behind() -> None:
    """SIGKILL the example once it has logged a training step: every process it started
    (bubblewrap and what runs inside) goes with it (bubblewrap's --die-with-parent)."""
    trainer = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--steps", "200"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        for line in trainer.stdout:  # TRL prints each step's logs: training is under way
            if "'loss'" in line:
                break
        sandboxes = descendants(trainer.pid)
        assert any("bwrap" in command_of(pid) for pid in sandboxes), "no sandbox was running mid-training"
    finally:
        trainer.kill()
        trainer.wait()
        trainer.stdout.close()
    for _ in range(200):  # the kernel delivers the parent-death signals; give it a moment
        if not [pid for pid in sandboxes if command_of(pid)]:
            break
        time.sleep(0.05)
    assert not [(pid, command_of(pid)) for pid in sandboxes if command_of(pid)]
