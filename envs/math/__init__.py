"""Math envs with verified answers, registered under GEM's ``math:`` and ``eval:`` ids.

``math:Arithmetic-v0`` draws every kind of problem; with the ``python_tool`` wrapper it makes a
real tool-using episode (compute in the sandbox, then answer in ``\\boxed{}``). The dataset ids
serve GEM's Hugging Face datasets with GEM's settings (``gem.make(id, sample=True)`` serves the
shipped sample instead, ``data_path=`` a local file). ``math:Geometry3K`` is left out: its
observations carry images, which text envs and their wrappers do not pass on.
"""

from __future__ import annotations

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

#: GEM's dataset ids -> (Hugging Face dataset, split: None for the dataset's only one).
DATASETS: dict[str, tuple[str, str | None]] = {
    "math:ASDiv2K": ("axon-rl/ASDIV-2k", None),
    "math:GSM8K": ("axon-rl/GSM-8k", None),
    "math:Math12K": ("axon-rl/MATH-12k", None),
    "math:Math8K-3to5": ("axon-rl/MATH-lvl3to5-8k", None),
    "math:Orz57K": ("axon-rl/ORZ-57k", None),
    "math:DeepScaleR40K": ("axon-rl/DeepScaleR-40K", None),
    "eval:MATH500": ("axon-rl/math-eval", "math"),
    "eval:AMC": ("axon-rl/math-eval", "amc"),
    "eval:OlympiadBench": ("axon-rl/math-eval", "olympiad_bench"),
    "eval:Minerva": ("axon-rl/math-eval", "minerva"),
    "eval:AIME24": ("axon-rl/math-eval", "aime24"),
}


def _gems_settings(dataset_name: str, split: str | None) -> dict[str, str]:
    """The kwargs GEM registers: a split only where it names one, the same keys everywhere."""
    settings = {"dataset_name": dataset_name, "split": split} if split else {"dataset_name": dataset_name}
    return {**settings, "question_key": "problem", "answer_key": "answer"}


SPECS = [
    EnvSpec("math:Arithmetic-v0", f"{__name__}.arithmetic:ArithmeticEnv", {}),
    *(
        EnvSpec(env_id, f"{__name__}.math_env:MathEnv", _gems_settings(name, split))
        for env_id, (name, split) in DATASETS.items()
    ),
]


def register_all() -> None:
    """Register every math id; ids already registered identically are left alone."""
    for spec in SPECS:
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
