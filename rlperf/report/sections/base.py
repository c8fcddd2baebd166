"""The section registry: every section of the report is one module of this package that
declares a :class:`Section` named ``SECTION`` (its title, its order, what it needs and how
it renders itself); :func:`registered` finds them and :func:`rlperf.report.document.document`
assembles them in one loop.

A section reads the report through :class:`Inputs`: the shared :class:`ReportResult`
(tables, analyses, figures, the gate), the comparison and its axis plans, the folders read.
What only a section computes (its ``collect``) is kept under its name in
``ReportResult.sections``, computed before any section renders, so that a section may
read another's (the answers read ``scaling``, ``returns`` and ``across``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.report.compare.axes import AxisPlan
from rlperf.report.compare.comparison import Comparison
from rlperf.report.export.render import Block
from rlperf.report.result import ReportResult


@dataclass(frozen=True)
class Inputs:
    """What every section may read; a section's ``needs`` names the parts it reads (fields of
    this class or of :class:`ReportResult`, or another section's name)."""

    result: ReportResult
    comparison: Comparison
    paths: Sequence[Path]  # the folders the report was asked to read
    sweeps: Sequence[Path]  # the sweep folders found under them

    @property
    def plans(self) -> dict[str, AxisPlan]:
        """Family -> its axis plan (axes, labels, constants)."""
        return self.comparison.plans

    def data(self, name: str) -> Any:
        """What section ``name`` collected (``ReportResult.sections[name]``)."""
        return self.result.sections[name]


@dataclass(frozen=True)
class Section:
    """One section of the report.

    ``name`` is the key of what it collects in ``ReportResult.sections``; ``title`` its
    heading (families write one per family); ``order`` its place in reading order;
    ``needs`` what it reads (see :class:`Inputs`); ``render`` its blocks (none: the
    section is left out). ``collect`` computes its own data from the shared inputs;
    ``draw`` draws that data's figures into the figures folder and returns them
    (name -> PNG), listed with the report's figures unless ``listed`` is false.
    """

    name: str
    title: str
    order: int
    needs: tuple[str, ...]
    render: Callable[[Inputs], list[Block]]
    collect: Callable[[Inputs], Any] | None = None
    draw: Callable[[Any, Path], dict[str, Path]] | None = None
    listed: bool = True


def registered() -> list[Section]:
    """Every section module's ``SECTION``, in reading order."""
    # Found, not listed: a new section is its module alone
    # (docs/development.md#adding-a-report-section).
    package = importlib.import_module(__package__ or "rlperf.report.sections")
    found: list[Section] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        section = getattr(module, "SECTION", None)
        if isinstance(section, Section):
            found.append(section)
    return sorted(found, key=lambda s: s.order)
