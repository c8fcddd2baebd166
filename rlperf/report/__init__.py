"""Report command: turn rlperf run folders (and the 2021 study's legacy folders) into
tidy tables, figures and findings.

The library entry point is :func:`build_report`; ``rlperf-report`` (:mod:`rlperf.report.cli`)
is a thin shell around it, and :mod:`rlperf.report.judge` reads a sweep's runs for its
rounds (the launcher plugin hands it to the sweep engine). Its errors live in :mod:`rlperf.errors`.

The map, bottom to top; each package imports only those below it (``.importlinter``'s
``report_layers`` contract):

- ``read/``: cells from folders. ``cells`` (the :class:`Cell`, ``STAGE_FAMILY``,
  ``PHASES``, ``PRIMARY_AXES``), ``discover`` (what is
  under a path), ``load`` (one rlperf cell; ``AXIS_KEYS``), ``legacy`` (one Tune run or
  study CSV), ``fingerprints``, ``energy``, ``searches`` (a search folder's
  ``search.json``), ``collect`` (every cell: ``read_cells``).
- ``stats/``: numbers with intervals. ``estimates`` (bootstrap intervals, ranks, speedups),
  ``robust`` (IQM, probability of improvement), ``usl`` (the Universal Scalability Law),
  ``repeats`` (configurations), ``objectives`` (``FAMILY_OBJECTIVE``, ``OBJECTIVES``,
  ``objective_of``), ``targets`` (time to target).
- ``compare/``: cells side by side. ``axes`` (axes and labels), ``workloads`` (comparison
  sets, what they hold constant), ``study`` (the study's way), ``findings`` (analyses),
  ``comparison`` (``compare_cells``, ``analyse``), ``gate``, ``across`` (workloads,
  machines), ``scaling`` (curves), ``returns`` (return comparisons).
- ``tables/``: the tidy tables. ``tidy`` (runs, configurations, iterations, latency, env
  windows; CSV + Parquet), ``env`` (the env stage's columns), ``serve`` (serve tables).
- ``figures/`` | ``export/``: ``figures.registry`` (``FIGURES``, ``draw_figures``),
  ``figures.plot`` and one module per subject; ``export.render`` (blocks to report.md and
  report.html), ``export.tracking`` (``--to``).
- ``result``: :class:`ReportResult`, what several sections, the command and the tests share.
- ``sections/``: ``base`` (the :class:`~rlperf.report.sections.base.Section` registry) and
  one module per section of the report, each declaring its title, order, needs and render.
- ``document`` (the sections in one loop) → ``build`` (:func:`build_report`) → ``cli``.
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
