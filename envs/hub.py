"""GEM's datasets from the Hugging Face Hub, for the catalogue's dataset envs (math, code).

A source is the one asked for, never a silent substitute: GEM's dataset by default (the
``datasets`` cache serves it offline once downloaded), a local ``data_path=``, or the sample
shipped with the env (``sample=True``). A download that fails raises one
:class:`DatasetUnavailable` saying how to use the other two, not a traceback from ``datasets``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DatasetUnavailable(RuntimeError):
    """GEM's dataset could not be loaded (offline and not cached, unreachable, a bad name, no
    ``datasets`` package)."""


def describe(dataset_name: str, split: str | None, data_path: object | None, sample: bool) -> str:
    """What ``gem-sandbox envs`` lists as the source."""
    if sample and data_path is not None:
        raise ValueError("pass data_path= or sample=True, not both: one source is never swapped for another")
    if sample:
        return "shipped sample"
    if data_path is not None:
        return f"local file {data_path}"
    return f"download: {dataset_name}" + (f" (split {split})" if split else "")


def describe_kwargs(kwargs: Mapping[str, Any]) -> str:
    """:func:`describe` from an env's registered kwargs, for its ``describe_source``; rows
    given directly (``dataset=``) are "given dataset", and exclude the other sources."""
    if kwargs.get("dataset") is not None:
        if kwargs.get("sample") or kwargs.get("data_path") is not None:
            raise ValueError("pass dataset=, data_path= or sample=True, not two: one source is never swapped")
        return "given dataset"
    return describe(
        kwargs.get("dataset_name", ""), kwargs.get("split"), kwargs.get("data_path"), kwargs.get("sample", False)
    )


def download(dataset_name: str, split: str | None, *, extra: str, offline: str) -> Any:
    """The dataset's one split (a ``datasets.Dataset``). ``extra`` names the gem-sandbox extra
    that installs ``datasets``; ``offline`` says how to do without the download."""
    where = dataset_name + (f" (split {split})" if split else "")
    try:
        import datasets
    except ModuleNotFoundError:
        raise DatasetUnavailable(
            f"downloading {where} needs the datasets package: pip install 'gem-sandbox[{extra}]'; or, {offline}"
        ) from None
    try:
        loaded = datasets.load_dataset(dataset_name, split=split)
    except Exception as exc:  # network, hub, cache and name failures alike; the reason is kept below
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise DatasetUnavailable(
            f"cannot load GEM's dataset {where}: {type(exc).__name__}: {reason}; {offline}"
        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            raise ValueError(f"{dataset_name} has several splits; pass split= one of {sorted(loaded)}")
        (loaded,) = loaded.values()
    return loaded
