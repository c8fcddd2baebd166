"""Benchmark of ``rlperf-report``: reading N cells x M iterations, tables, figures.

The issue's target: reading 100 cells x 1,000 iterations takes under 10 s.
Cells are written in rlperf's result format (docs/results.md) by the tests'
kit ``tests/support/synthetic.py``, replaying the 2021 study's measured iterations
(tests/data/thesis), so every column holds realistic values. The kit is not part
of the package: run with ``PYTHONPATH=tests`` (``nox -s bench`` sets it).

Usage::

    PYTHONPATH=tests python benchmarks/bench_report.py       # 100 cells x 1000 iterations
    PYTHONPATH=tests python benchmarks/bench_report.py --cells 20 --iterations 200 --figures
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THESIS = ROOT / "tests" / "data" / "thesis"


def main() -> None:
    """Write the sweep, then time each step of the report and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", type=int, default=100)
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--figures", action="store_true", help="also time the full report")
    p.add_argument("--keep", type=Path, default=None, help="write the sweep here and keep it")
    args = p.parse_args()

    try:
        from support import synthetic
    except ModuleNotFoundError as exc:
        if exc.name != "support":
            raise
        raise SystemExit(
            "bench_report.py writes its cells with the tests' kit: run it with "
            "PYTHONPATH=tests (docs/development.md, Benchmarks)"
        ) from exc
    from rlperf.report.build import build_report
    from rlperf.report.read.collect import load_cells
    from rlperf.report.read.discover import discover

    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        sweep = root / "multirun" / "bench"
        t0 = time.perf_counter()
        synthetic.study_training_sweep(THESIS, sweep, iterations=args.iterations,
                                       n_cells=args.cells)  # fmt: skip
        t_write = time.perf_counter() - t0
        size_mb = sum(f.stat().st_size for f in sweep.rglob("*") if f.is_file()) / 2**20

        t0 = time.perf_counter()
        disc = discover([sweep])
        cells, skipped = load_cells(disc.refs)
        t_read = time.perf_counter() - t0
        assert len(cells) == args.cells and not skipped

        t0 = time.perf_counter()
        res = build_report([sweep], root / "report-tables", figures=False)
        t_tables = time.perf_counter() - t0
        rows = len(res.iterations)

        t_full = float("nan")
        if args.figures:
            t0 = time.perf_counter()
            build_report([sweep], root / "report-full")
            t_full = time.perf_counter() - t0

    print(f"sweep: {args.cells} cells x {args.iterations} iterations, {size_mb:.1f} MiB "
          f"(written in {t_write:.1f} s)")  # fmt: skip
    print(f"discover + read cells:                 {t_read:6.2f} s  (target < 10 s)")
    print(f"report without figures (read, stats,   {t_tables:6.2f} s  ({rows} iteration rows)")
    print("  tables CSV+Parquet, report.md/html)")
    if args.figures:
        print(f"full report with figures (PNG+SVG):    {t_full:6.2f} s")


if __name__ == "__main__":
    main()
