"""Timing helpers and the table every benchmark prints."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@dataclass
class Row:
    what: str
    ours: float
    baseline: float | None
    unit: str
    baseline_name: str = ""
    higher_is_better: bool = False

    @property
    def ratio(self) -> str:
        if not self.baseline or not self.ours:
            return "-"
        r = self.ours / self.baseline if self.higher_is_better else self.baseline / self.ours
        return f"{r:,.1f}x"


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def print_table(title: str, rows: list[Row]) -> None:
    """A Markdown table: ours, the baseline, and how many times better ours is."""
    print(f"\n### {title}\n\n{machine()}\n")
    print("| measurement | gem-sandbox | baseline | ratio |")
    print("|---|---:|---:|---:|")
    for row in rows:
        base = f"{_fmt(row.baseline)} {row.unit} ({row.baseline_name})" if row.baseline is not None else "-"
        print(f"| {row.what} | {_fmt(row.ours)} {row.unit} | {base} | {row.ratio} |")


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}" if value >= 0.1 else f"{value:.3f}"
