"""Report command: turn rlperf run folders (and the 2021 study's legacy folders) into
tidy tables, figures and findings.

The library entry point is :func:`build_report`; ``rlperf-report`` (:mod:`rlperf.report.cli`)
is a thin shell around it. Its errors live in :mod:`rlperf.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlperf.report.build import build_report
    from rlperf.report.result import ReportResult

__all__ = ["ReportResult", "build_report"]

# Resolved on first use: the report's modules import pandas, numpy and scipy, and
# `rlperf-report --help` (which imports this package) must load none of them.
_LAZY = {
    "build_report": "rlperf.report.build",
    "ReportResult": "rlperf.report.result",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlperf.report' has no attribute {name!r}")
