"""Question-answering envs: GEM's ``logic:``, ``qa:`` and QA ``eval:`` ids, and a fictional world.

The dataset ids serve GEM's Hugging Face datasets with GEM's settings (``gem.make(id,
sample=True)`` serves the shipped sample instead, ``data_path=`` a local file); answers are
scored by exact match after SQuAD's normalisation (:mod:`.qa_env`). With the ``search_tool``
wrapper, GEM's QA datasets need a retrieval server (``$SEARCH_URL``) over the corpus their
questions are about, e.g. Search-R1's Wikipedia.

``qa:FictionalWorld-v0`` (single- and two-hop) and ``qa:FictionalWorld-2hop-v0`` are
gem-sandbox's own, not GEM's: questions on a made-up world that only its shipped corpus
answers, which the ``search_tool`` wrapper searches with the embedded index, no server needed
(:mod:`.fictional`).
"""

from __future__ import annotations

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

#: GEM's dataset ids -> (Hugging Face dataset, split, question key, extract_boxed).
DATASETS: dict[str, tuple[str, str, str, bool]] = {
    **{f"logic:RuleTaker-d{i}": (f"axon-rl/RuleTaker-d{i}-70k", "train", "question", True) for i in (0, 1, 2, 3, 5)},
    "qa:NaturalQuestions": ("axon-rl/NaturalQuestions", "train", "problem", False),
    "qa:HotpotQA": ("axon-rl/HotpotQA", "train", "problem", False),
    "eval:QaOpen": ("google-research-datasets/nq_open", "validation", "question", False),
    **{
        f"eval:{name}": ("axon-rl/search-eval", split, "question", False)
        for name, split in [
            ("2Wiki", "2wiki"),
            ("PopQA", "popqa"),
            ("TriviaQA", "tq"),
            ("HotpotQA", "hotpotqa"),
            ("Bamboogle", "bamboogle"),
            ("NaturalQuestions", "nq"),
            ("Musique", "musique"),
        ]
    },
}


def _gems_settings(dataset_name: str, split: str, question_key: str, extract_boxed: bool) -> dict[str, object]:
    """The kwargs GEM registers, in GEM's order (``extract_boxed`` only where it sets it)."""
    boxed = {"extract_boxed": True} if extract_boxed else {}
    return {"dataset_name": dataset_name, "split": split, **boxed, "question_key": question_key, "answer_key": "answer"}


SPECS = [
    *(EnvSpec(env_id, f"{__name__}.qa_env:QaEnv", _gems_settings(*settings)) for env_id, settings in DATASETS.items()),
    EnvSpec("qa:FictionalWorld-v0", f"{__name__}.qa_env:FictionalWorldEnv", {}),
    EnvSpec("qa:FictionalWorld-2hop-v0", f"{__name__}.qa_env:FictionalWorldEnv", {"hops": 2}),
]


def register_all() -> None:
    """Register every QA id; ids already registered identically are left alone."""
    for spec in SPECS:
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
