"""Where a code env's tasks come from: the shipped sample, a local JSONL file, or a download.

Downloads go through :mod:`gem_sandbox_envs.hub`, as GEM's do; a failed one raises
:class:`~gem_sandbox_envs.hub.DatasetUnavailable` saying how to run offline instead. The order of
tasks is GEM's: shuffled by the env's seed, reshuffled each epoch; ``reset(seed=s)`` draws one by
seed.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from gem_sandbox_envs import hub

Task = Mapping[str, Any]


def load(
    dataset_name: str, split: str | None, data_path: str | None, sample: bool, sample_file: str
) -> Sequence[Task]:
    hub.describe(dataset_name, split, data_path, sample)  # refuses two sources at once
    if sample:
        return read_jsonl(files(__package__).joinpath("data", sample_file).read_text(encoding="utf-8"))
    if data_path:
        return read_jsonl(Path(data_path).read_text(encoding="utf-8"))
    return download(dataset_name, split, sample_file)


def read_jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def download(dataset_name: str, split: str | None, sample_file: str) -> Sequence[Task]:
    offline = (
        f"pass data_path='tasks.jsonl' (one task per line, in the dataset's format) or "
        f"sample=True for the shipped sample ({sample_file})"
    )
    return hub.download(dataset_name, split, extra="code", offline=offline)


class TaskCycle:
    """Hands out tasks: in a shuffled order, reshuffled each epoch, or one drawn by an rng."""

    def __init__(self, tasks: Sequence[Task], seed: int | None) -> None:
        if not len(tasks):
            raise ValueError("no tasks to serve: the dataset or file is empty")
        self.tasks = tasks
        self.seed = seed or 0
        self.epoch = 0
        self._order = self._shuffled()

    def __len__(self) -> int:
        return len(self.tasks)

    def _shuffled(self) -> list[int]:
        order = list(range(len(self.tasks)))
        random.Random(self.seed + self.epoch).shuffle(order)
        return order

    def next(self) -> Task:
        if not self._order:
            self.epoch += 1
            self._order = self._shuffled()
        return self.tasks[self._order.pop()]

    def draw(self, rng: random.Random) -> Task:
        return self.tasks[rng.randrange(len(self.tasks))]

    def __deepcopy__(self, memo: dict[int, Any]) -> TaskCycle:
        """Copies (``get_state``, ``spawn``) share the read-only tasks, which may be a whole
        dataset, and get an order of their own."""
        clone = copy.copy(self)
        clone._order = list(self._order)
        return clone
