"""A search folder's ``search.json`` (docs/search.md), read for the report: its objective,
best trial and trials (:func:`read_searches`), and the best-so-far curve of its trials.
The figure is :mod:`rlperf.report.figures.search`'s, the section
:mod:`rlperf.report.sections.search`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.layout import SEARCH_FILE
from rlperf.vocabulary import RunStatus

FIGURE_PREFIX = "search"


@dataclass
class SearchResult:
    """One search folder: its ``search.json`` as a dict, its trials as a table, its figure."""

    folder: Path
    data: dict[str, Any]
    trials: pd.DataFrame
    figure: Path | None = None


def read_searches(sweeps: Sequence[Path]) -> list[SearchResult]:
    """The searches among the sweep folders the report found (those with ``search.json``)."""
    out = []
    for folder in sweeps:
        try:
            data = json.loads((Path(folder) / SEARCH_FILE).read_text())
        except (OSError, ValueError):
            continue
        rows = [
            {
                "number": t["number"],
                "trial": t["subdir"],
                "status": t["status"],
                "score": t["score"],
                **t["params"],
            }  # fmt: skip
            for t in data.get("trials", [])
        ]
        out.append(SearchResult(Path(folder), data, pd.DataFrame(rows)))
    return out


def best_so_far(trials: pd.DataFrame, mode: str) -> pd.Series:
    """The best completed score up to each trial (in start order); NaN before the first."""
    scores = trials["score"].where(trials["status"] == RunStatus.completed).astype(float)
    best = scores.cummax() if mode == "max" else scores.cummin()
    return best.ffill()
