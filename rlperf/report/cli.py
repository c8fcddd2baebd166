"""``rlperf-report``: compare runs in output folders (a thin shell over :func:`build_report`).

Imports nothing heavy until the arguments are parsed, so ``--help`` is instant.
Exit status (docs/report.md): 0 done (and, with ``--gate``, no regression); 1 the
gate found a regression or a missing configuration; 2 a user error (a path
without runs, an unknown baseline, ``--strict`` with mixed fingerprints, a bad
tolerance, a gate with nothing to compare); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rlperf.errors import (
    BaselineError,
    ExitCode,
    GateError,
    MixedFingerprintsError,
    NoRunsFoundError,
    ObjectiveError,
    exit_code_of,
    interrupt_reason,
    stop_handlers,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlperf-report",
        description="Compare rlperf runs (run folders, sweep folders or folders of them; also "
        "RLlib 1.x / Tune folders and the 2021 study's rollout CSVs): writes tidy tables "
        "(CSV + Parquet), figures (PNG + SVG), report.md and a self-contained report.html.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="run folder, sweep folder, or a folder holding them",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: report/ inside the first PATH)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        metavar="KEY=VALUE[,...]",
        help="the configuration (per model) speedups are relative to, e.g. "
        "'gpu_layout=none,workers=8' (default: the slowest configuration of each model)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse to compare cells recorded on different hardware or software",
    )
    p.add_argument(
        "--gate",
        type=Path,
        default=None,
        metavar="BASELINE",
        help="judge the PATHs against a stored baseline run or sweep folder: exit 1 when a "
        "configuration is slower beyond --tolerance (its speedup interval lies below "
        "1 - tolerance) or missing; improvements and ties pass",
    )
    p.add_argument(
        "--tolerance",
        default="5%",
        metavar="T",
        help="slowdown the gate lets through, e.g. 5%% (default) or 0.05",
    )
    p.add_argument(
        "--objective",
        choices=("env_steps", "trained_steps", "iter_s", "time_to_target"),
        default=None,
        help="what training is ranked on (default, per comparison: time to target where the "
        "runs have a target, else env_steps, the time per 1 000 env steps); iter_s only where "
        "every iteration sampled the same env steps",
    )
    p.add_argument("--no-figures", action="store_true", help="write tables and text only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlperf-report`` console script; returns the exit status.

    docs/exit-codes.md: 0 report written; 2 nothing to report or a refusal the
    user can fix (no runs, ``--strict`` and mixed hardware, a bad ``--baseline``,
    a bad argument); 1 a ``--gate`` that failed, or an unexpected error (with its
    traceback); 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
    """
    args = _parser().parse_args(argv)
    with stop_handlers():
        try:
            return _run(args)
        except KeyboardInterrupt as exc:
            print(f"rlperf-report: {interrupt_reason()}", file=sys.stderr)
            return exit_code_of(exc)


def _run(args: argparse.Namespace) -> int:
    # The report's modules import pandas, numpy and scipy: deferred so that `--help` loads
    # none of them (tests/report/test_report_cli.py).
    from rlperf.report.build import build_report
    from rlperf.report.gate import lines, parse_tolerance

    def progress(msg: str) -> None:
        print(f"rlperf-report: {msg}", file=sys.stderr, flush=True)

    try:
        result = build_report(
            args.paths,
            out=args.out,
            baseline=args.baseline,
            strict=args.strict,
            figures=not args.no_figures,
            gate=args.gate,
            tolerance=parse_tolerance(args.tolerance),
            objective=args.objective,
            progress=None if args.quiet else progress,
        )
    except (NoRunsFoundError, MixedFingerprintsError, BaselineError, GateError,
            ObjectiveError) as exc:  # fmt: skip
        print(f"rlperf-report: error: {exc}", file=sys.stderr)
        return ExitCode.user_error
    for w in result.warnings:
        print(f"rlperf-report: warning: {w}", file=sys.stderr)
    for s in result.skipped:
        print(f"rlperf-report: skipped {s.path}: {s.reason}", file=sys.stderr)
    if result.gate is not None:
        units = {fam: a.unit for fam, a in result.analyses.items()}
        print("\n".join(lines(result.gate, units)))
    print(result.html)
    return ExitCode.failed if result.gate is not None and result.gate.failed else ExitCode.completed


if __name__ == "__main__":
    sys.exit(main())
