"""A single-turn dataset env's rows: questions and their accepted answers, from one source, served in GEM's order.

The math and QA envs read the same kinds of source the same way, so both use this module; each
says only what differs (:class:`Source`): where its samples are shipped, how a row's answer
becomes the strings it accepts, and the extra its messages name. Both envs are
:class:`QuestionEnv` subclasses, serving one question per episode (:class:`EpochOrder`).

The source is the one asked for, never a silent substitute: by default GEM's dataset through
:func:`gem_sandbox_envs.hub.download` (``datasets`` is imported only then; its cache serves it
offline once downloaded), ``data_path=`` a local ``.jsonl`` or ``.parquet`` file,
``sample=True`` the rows shipped in the package's ``data/`` for the dataset
(``<dataset>[.<split>].jsonl``, :func:`sample_name`). A download that fails raises
:class:`~gem_sandbox_envs.hub.DatasetUnavailable`, saying how to use the other two.
"""

from __future__ import annotations

import errno
import json
import os
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from gem_sandbox_envs import hub

from gem_sandbox.core import Env

StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class Items:
    """Questions and their accepted answers, in the source's order."""

    questions: tuple[str, ...]
    answers: tuple[tuple[str, ...], ...]

    def __len__(self) -> int:
        return len(self.questions)

    def __deepcopy__(self, memo: dict[int, Any]) -> Items:
        return self  # immutable: copies of an env (get_state, spawn) share a whole dataset


def sample_name(dataset_name: str, split: str | None) -> str:
    """The shipped sample of a dataset: ``axon-rl/math-eval`` split ``amc`` -> ``math-eval.amc.jsonl``."""
    return dataset_name.rpartition("/")[2] + (f".{split}" if split else "") + ".jsonl"


@dataclass(frozen=True)
class Source:
    """How one family of envs reads its rows (see the module's docstring).

    ``package`` ships the samples in its ``data/`` (files starting with one of ``not_samples``
    are other data); ``accept`` turns a row's answer into the strings it accepts, raising
    ValueError for one it cannot; ``extra`` is the gem-sandbox extra that installs ``datasets``;
    ``pyarrow`` what to ``pip install`` for parquet files; ``noun`` what a row is called.
    """

    package: str
    accept: Callable[[Any], tuple[str, ...]]
    extra: str
    noun: str
    pyarrow: str = "pyarrow"
    not_samples: tuple[str, ...] = ()

    def data(self) -> Traversable:
        return files(self.package).joinpath("data")

    def load(
        self,
        dataset_name: str,
        split: str | None,
        data_path: StrPath | None,
        sample: bool,
        question_key: str,
        answer_key: str,
        dataset: Any = None,
    ) -> Items:
        """The rows of the chosen source: ``dataset`` when given (GEM's ``dataset=``)."""
        keys = (question_key, answer_key)
        if dataset is not None:
            return self.from_dataset(dataset, split, keys)
        hub.describe(dataset_name, split, data_path, sample)  # refuses two sources at once
        if data_path is not None:
            return self.read_file(Path(data_path), keys)
        if not dataset_name:
            raise ValueError(
                f"no {self.noun}s to serve: pass dataset_name= (sample=True for its shipped sample) or data_path="
            )
        if sample:
            return self._read_sample(dataset_name, split, keys)
        return self.download(dataset_name, split, keys)

    def _read_sample(self, dataset_name: str, split: str | None, keys: tuple[str, str]) -> Items:
        data = self.data()
        name = sample_name(dataset_name, split)
        if not data.joinpath(name).is_file():
            shipped = sorted(
                entry.name
                for entry in data.iterdir()
                if entry.name.endswith(".jsonl") and not entry.name.startswith(self.not_samples)
            )
            raise ValueError(f"no sample is shipped for {name[: -len('.jsonl')]}; the samples: {', '.join(shipped)}")
        return self._from_jsonl(data.joinpath(name).read_text(encoding="utf-8"), f"the shipped sample {name}", keys)

    def read_file(self, path: Path, keys: tuple[str, str]) -> Items:
        """A ``.jsonl`` file (one JSON object a line) or a ``.parquet`` file."""
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no such data file", str(path))
        if path.suffix == ".jsonl":
            return self._from_jsonl(path.read_text(encoding="utf-8"), str(path), keys)
        if path.suffix == ".parquet":
            return self._from_parquet(path, keys)
        raise ValueError(f"data_path must be a .jsonl or a .parquet file, got {path}")

    def _from_jsonl(self, text: str, where: str, keys: tuple[str, str]) -> Items:
        rows: list[dict[str, Any]] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}, line {number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}, line {number}: a {self.noun} is a JSON object, got {line[:60]!r}")
            if missing := [key for key in keys if key not in row]:
                raise ValueError(f"{where}, line {number}: no {' or '.join(map(repr, missing))} field")
            rows.append(row)
        return self.items([row[keys[0]] for row in rows], [row[keys[1]] for row in rows], where)

    def _from_parquet(self, path: Path, keys: tuple[str, str]) -> Items:
        try:
            import pyarrow.parquet as pq
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(f"reading {path} needs pyarrow: pip install {self.pyarrow}", name=exc.name) from None
        columns = pq.read_schema(path).names
        if missing := [key for key in keys if key not in columns]:
            raise ValueError(f"{path} has no {' or '.join(map(repr, missing))} column; its columns: {columns}")
        table = pq.read_table(path, columns=list(keys))
        return self.items(table.column(keys[0]).to_pylist(), table.column(keys[1]).to_pylist(), str(path))

    def download(self, dataset_name: str, split: str | None, keys: tuple[str, str]) -> Items:
        """GEM's dataset from the Hugging Face Hub, or from the ``datasets`` cache when offline."""
        where = dataset_name + (f" (split {split})" if split else "")
        offline = (
            f"to run without it, pass data_path= a local .jsonl or .parquet file with {keys[0]!r} and "
            f"{keys[1]!r} fields, or sample=True for the shipped sample"
        )
        loaded = hub.download(dataset_name, split, extra=self.extra, offline=offline)
        if missing := [key for key in keys if key not in loaded.column_names]:
            named = " or ".join(map(repr, missing))
            raise ValueError(f"{where} has no {named} column; its columns: {loaded.column_names}")
        return self.items(loaded[keys[0]], loaded[keys[1]], where)

    def items(self, questions: Iterable[Any], answers: Iterable[Any], where: str) -> Items:
        """Validated rows: each question a string, each answer one ``accept`` takes."""
        question_list = list(questions)
        answer_list = []
        for number, answer in enumerate(answers, 1):
            try:
                answer_list.append(self.accept(answer))
            except ValueError as exc:
                raise ValueError(f"{where}, {self.noun} {number}: {exc}") from None
        if not question_list:
            raise ValueError(f"{where} has no {self.noun}s")
        if not all(isinstance(q, str) for q in question_list):
            bad = next(q for q in question_list if not isinstance(q, str))
            raise ValueError(f"{where}: questions are strings, got {bad!r}")
        return Items(tuple(question_list), tuple(answer_list))

    def from_dataset(self, dataset: Any, split: str | None, keys: tuple[str, str]) -> Items:
        """Rows given directly (GEM's ``dataset=``): a ``datasets`` Dataset (a DatasetDict: its
        ``split``, or its only one) or an iterable of mappings."""
        where = "the given dataset"
        if isinstance(dataset, Mapping) and all(hasattr(part, "column_names") for part in dataset.values()):
            if split is not None:
                dataset = dataset[split]
            elif len(dataset) == 1:
                (dataset,) = dataset.values()
            else:
                raise ValueError(f"the dataset has several splits; pass split= one of {sorted(dataset)}")
        if hasattr(dataset, "column_names"):
            if missing := [key for key in keys if key not in dataset.column_names]:
                raise ValueError(f"{where} has no {' or '.join(map(repr, missing))} column: {dataset.column_names}")
            return self.items(dataset[keys[0]], dataset[keys[1]], where)
        rows = list(dataset) if isinstance(dataset, Iterable) else None
        if rows is None or not all(isinstance(row, Mapping) for row in rows):
            raise ValueError("dataset= is a datasets.Dataset or a list of rows (dicts)")
        for number, row in enumerate(rows, 1):
            if missing := [key for key in keys if key not in row]:
                raise ValueError(f"{where}, row {number}: no {' or '.join(map(repr, missing))} field")
        return self.items([row[keys[0]] for row in rows], [row[keys[1]] for row in rows], where)


class EpochOrder:
    """Which row ``reset`` serves: ``idx`` the source's ``idx``-th, else with a ``seed`` one drawn
    by ``rng``, else the next of an epoch shuffled by ``rng`` (each row once per epoch). Kept on
    the env, so ``get_state`` and copies carry the rest of the epoch."""

    def __init__(self, noun: str) -> None:
        self.noun = noun
        self._left: list[int] = []  # the rest of this epoch, served from the end

    def serve(
        self, rng: random.Random, seed: int | None, idx: int | None, items: Items, source: str
    ) -> tuple[str, tuple[str, ...]]:
        """The question ``reset`` serves and its accepted answers."""
        n = len(items)
        if idx is not None:
            if not 0 <= idx < n:
                raise IndexError(f"idx {idx} is out of range: {source} has {n} {self.noun}s")
        elif seed is not None:
            idx = rng.randrange(n)
        else:
            if not self._left:
                self._left = list(range(n))
                rng.shuffle(self._left)
            idx = self._left.pop()
        return items.questions[idx], items.answers[idx]


class QuestionEnv(Env[str, str]):
    """A single-turn env asking one question of its rows per episode (the math and QA envs):
    where the rows come from (``source``), and the current question and its accepted answers."""

    def __init__(self, seed: int | None, source: str, noun: str) -> None:
        super().__init__(seed)
        self.source = source
        self.question = ""
        self.answers: tuple[str, ...] = ()
        self._order = EpochOrder(noun)

    @classmethod
    def describe_source(cls, **kwargs: Any) -> str:
        return hub.describe_kwargs(kwargs)

    def ask(self, seed: int | None, idx: int | None, items: Items) -> str:
        """Reseed (when ``seed`` is given), then take this episode's question of ``items``."""
        self.seed_rng(seed)
        self.question, self.answers = self._order.serve(self.rng, seed, idx, items, self.source)
        return self.question
