"""Where a math env's problems come from: GEM's Hugging Face dataset, a local file or a shipped sample.

The source is the one asked for, never a silent substitute: by default GEM's dataset through
``datasets.load_dataset`` (imported only then; its cache serves it offline once downloaded),
``data_path=`` a local ``.jsonl`` or ``.parquet`` file, ``sample=True`` the handful of
problems shipped in ``data/`` for the dataset (``<dataset>[.<split>].jsonl``). A download that
fails raises :class:`~gem_sandbox_envs.hub.DatasetUnavailable`, saying how to use the other
two.

Rows have GEM's fields: a question (``question_key``) and its answer (``answer_key``): a
string, a number, or a list of accepted answers (``axon-rl/math-eval`` stores lists).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from gem_sandbox_envs import hub

StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class Problems:
    """Questions and their accepted answers, in the source's order."""

    questions: tuple[str, ...]
    answers: tuple[tuple[str, ...], ...]

    def __len__(self) -> int:
        return len(self.questions)

    def __deepcopy__(self, memo: dict[int, Any]) -> Problems:
        return self  # immutable: copies of an env (get_state, spawn) share a whole dataset


def sample_name(dataset_name: str, split: str | None) -> str:
    """The shipped sample of a dataset: ``axon-rl/math-eval`` split ``amc`` -> ``math-eval.amc.jsonl``."""
    return dataset_name.rpartition("/")[2] + (f".{split}" if split else "") + ".jsonl"


def load(
    dataset_name: str,
    split: str | None,
    data_path: StrPath | None,
    sample: bool,
    question_key: str,
    answer_key: str,
) -> Problems:
    """The problems of the chosen source (see the module's docstring)."""
    hub.describe(dataset_name, split, data_path, sample)  # refuses two sources at once
    keys = (question_key, answer_key)
    if data_path is not None:
        return read_file(Path(data_path), keys)
    if not dataset_name:
        raise ValueError("no problems to serve: pass dataset_name= (sample=True for its shipped sample) or data_path=")
    if sample:
        return _read_sample(dataset_name, split, keys)
    return download(dataset_name, split, keys)


def _read_sample(dataset_name: str, split: str | None, keys: tuple[str, str]) -> Problems:
    data = files(__package__).joinpath("data")
    name = sample_name(dataset_name, split)
    if not data.joinpath(name).is_file():
        shipped = sorted(entry.name for entry in data.iterdir() if entry.name.endswith(".jsonl"))
        raise ValueError(f"no sample is shipped for {name[: -len('.jsonl')]}; the samples: {', '.join(shipped)}")
    return _from_jsonl(data.joinpath(name).read_text(encoding="utf-8"), f"the shipped sample {name}", keys)


def read_file(path: Path, keys: tuple[str, str]) -> Problems:
    """A ``.jsonl`` file (one JSON object a line) or a ``.parquet`` file (one row a problem)."""
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "no such data file", str(path))
    if path.suffix == ".jsonl":
        return _from_jsonl(path.read_text(encoding="utf-8"), str(path), keys)
    if path.suffix == ".parquet":
        return _from_parquet(path, keys)
    raise ValueError(f"data_path must be a .jsonl or a .parquet file, got {path}")


def _from_jsonl(text: str, where: str, keys: tuple[str, str]) -> Problems:
    rows: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(rows[-1], dict):
            raise ValueError(f"{where}, line {number}: a problem is a JSON object, got {line[:60]!r}")
        if missing := [key for key in keys if key not in rows[-1]]:
            raise ValueError(f"{where}, line {number}: no {' or '.join(map(repr, missing))} field")
    question_key, answer_key = keys
    return _problems((row[question_key] for row in rows), (row[answer_key] for row in rows), where)


def _from_parquet(path: Path, keys: tuple[str, str]) -> Problems:
    try:
        import pyarrow.parquet as pq
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"reading {path} needs pyarrow: pip install 'gem-sandbox[math]'", name=exc.name
        ) from None
    columns = pq.read_schema(path).names
    if missing := [key for key in keys if key not in columns]:
        raise ValueError(f"{path} has no {' or '.join(map(repr, missing))} column; its columns: {columns}")
    table = pq.read_table(path, columns=list(keys))
    return _problems(table.column(keys[0]).to_pylist(), table.column(keys[1]).to_pylist(), str(path))


def download(dataset_name: str, split: str | None, keys: tuple[str, str]) -> Problems:
    """GEM's dataset from the Hugging Face Hub, or from the ``datasets`` cache when offline."""
    where = dataset_name + (f" (split {split})" if split else "")
    offline = (
        f"to run without it, pass data_path= a local .jsonl or .parquet file with {keys[0]!r} and "
        f"{keys[1]!r} fields, or sample=True for the shipped sample"
    )
    loaded = hub.download(dataset_name, split, extra="math", offline=offline)
    if missing := [key for key in keys if key not in loaded.column_names]:
        named = " or ".join(map(repr, missing))
        raise ValueError(f"{where} has no {named} column; its columns: {loaded.column_names}")
    return _problems(loaded[keys[0]], loaded[keys[1]], where)


def _problems(questions: Iterable[Any], answers: Iterable[Any], where: str) -> Problems:
    question_list, answer_list = list(questions), [_accepted(answer, where) for answer in answers]
    if not question_list:
        raise ValueError(f"{where} has no problems")
    if not all(isinstance(q, str) for q in question_list):
        bad = next(q for q in question_list if not isinstance(q, str))
        raise ValueError(f"{where}: questions are strings, got {bad!r}")
    return Problems(tuple(question_list), tuple(answer_list))


def _accepted(answer: Any, where: str) -> tuple[str, ...]:
    """The answers a row accepts, as text: one, or each of a list."""
    values = answer if isinstance(answer, list | tuple) else [answer]
    if not values or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
        raise ValueError(f"{where}: an answer is a string, a number or a list of them, got {answer!r}")
    return tuple(map(str, values))
