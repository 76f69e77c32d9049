"""Where a QA env's questions come from: GEM's Hugging Face dataset, a local file or a shipped sample.

How a source is read is shared with the math envs (:mod:`gem_sandbox_envs.rows`); here is what
is the QA envs' own: the samples in ``data/`` (beside gem-sandbox's fictional world, which is
not one), and the answers a row accepts (one or a list, see
:func:`~gem_sandbox_envs.qa.scoring.accepted_answers`).
"""

from __future__ import annotations

from pathlib import Path

from gem_sandbox_envs.qa.scoring import accepted_answers
from gem_sandbox_envs.rows import Items as Questions
from gem_sandbox_envs.rows import Source, StrPath, sample_name

SOURCE = Source(__package__, accepted_answers, extra="qa", noun="question", not_samples=("fictional-world",))

load = SOURCE.load
read_file = SOURCE.read_file
download = SOURCE.download
from_dataset = SOURCE.from_dataset  # rows given directly (GEM's dataset=)


def data_dir() -> Path:
    """The shipped data: the samples and gem-sandbox's fictional world."""
    return Path(str(SOURCE.data()))


__all__ = ["SOURCE", "Questions", "StrPath", "data_dir", "download", "from_dataset", "load", "read_file", "sample_name"]
