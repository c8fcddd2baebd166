"""What a report produced: its tidy tables (:class:`Tables`) and everything else
(:class:`ReportResult`, which :func:`rlperf.report.build.build_report` returns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rlperf.report.compare.across import AcrossTable
from rlperf.report.compare.findings import FamilyAnalysis, Finding
from rlperf.report.compare.gate import GateResult
from rlperf.report.compare.returns import ReturnComparison
from rlperf.report.compare.scaling import ScalingCurve
from rlperf.report.read.cells import Cell
from rlperf.report.read.discover import Skipped
from rlperf.report.read.fingerprints import FingerprintGroup
from rlperf.report.read.searches import SearchResult
from rlperf.report.tables.serve import ServeTables


@dataclass
class Tables:
    """The report's tidy tables (docs/report.md) and the files they were written to."""

    runs: pd.DataFrame
    configurations: pd.DataFrame
    iterations: pd.DataFrame
    latency: pd.DataFrame
    files: list[Path]
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)
    env_windows: pd.DataFrame = field(default_factory=pd.DataFrame)  # stage=env's windows


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
    searches: list[SearchResult] = field(default_factory=list)  # rlperf.report.read.searches
    markdown: Path | None = None
    html: Path | None = None
    #: (family, workload) -> what that comparison's cells share (part -> text)
    held_constant: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    across: list[AcrossTable] = field(default_factory=list)  # rlperf.report.compare.across
    scaling: list[ScalingCurve] = field(default_factory=list)  # rlperf.report.compare.scaling
    returns: list[ReturnComparison] = field(default_factory=list)  # rlperf.report.compare.returns
