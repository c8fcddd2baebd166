"""What a report produced (:class:`ReportResult`, which
:func:`rlperf.report.build.build_report` returns): what several sections, the figures, the
command line or the tests share. What one section alone computes is under its name in
``sections`` (:mod:`rlperf.report.sections.base`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rlperf.report.compare.findings import FamilyAnalysis, Finding
from rlperf.report.compare.gate import GateResult
from rlperf.report.read.cells import Cell
from rlperf.report.read.discover import Skipped
from rlperf.report.read.fingerprints import FingerprintGroup
from rlperf.report.tables.serve import ServeTables


@dataclass
class ReportResult:
    """Everything a report produced (tables in memory and the files written)."""

    out: Path
    cells: list[Cell]
    skipped: list[Skipped]
    runs: pd.DataFrame
    iterations: pd.DataFrame
    latency: pd.DataFrame
    figures: dict[str, Path]
    figures_skipped: dict[str, str]
    findings: list[Finding]
    warnings: list[str]
    fingerprint_groups: dict[str, FingerprintGroup]
    mixed: dict[tuple[str, str], list[str]]
    analyses: dict[str, FamilyAnalysis]
    configurations: pd.DataFrame = field(default_factory=pd.DataFrame)
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)  # rlperf.report.stats.targets
    env_windows: pd.DataFrame = field(default_factory=pd.DataFrame)  # stage=env's windows
    gate: GateResult | None = None
    files: list[Path] = field(default_factory=list)
    serve: ServeTables | None = None
    markdown: Path | None = None
    html: Path | None = None
    #: section name -> what that section collected (rlperf.report.sections.base): e.g.
    #: ``across``, ``scaling``, ``returns``, ``search``, ``families`` (what each comparison
    #: holds constant)
    sections: dict[str, Any] = field(default_factory=dict)
