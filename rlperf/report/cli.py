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
from typing import Any

from rlperf.errors import (
    BaselineError,
    ConfigError,
    ExitCode,
    GateError,
    MixedFingerprintsError,
    NoRunsFoundError,
    ObjectiveError,
    exit_code_of,
    interrupt_reason,
    stop_handlers,
)
from rlperf.results.columns import TRAINING_OBJECTIVES
from rlperf.results.storage import is_uri, mirror
from rlperf.tracking.tools import TOOLS, missing_tools


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
        metavar="PATH",
        help="run folder, sweep folder, or a folder holding them; or a sweep's storage URI "
        "(s3://bucket/prefix, from hydra.launcher.storage), copied to a local folder first",
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
        choices=TRAINING_OBJECTIVES,
        default=None,
        help="what training is ranked on (default, per comparison: time to target where the "
        "runs have a target, else env_steps, the time per 1 000 env steps); iter_s only where "
        "every iteration sampled the same env steps",
    )
    p.add_argument("--no-figures", action="store_true", help="write tables and text only")
    p.add_argument(
        "--prior",
        action="store_true",
        help="print the run-to-run variance prior the PATHs' repeated configurations fit, per "
        "machine and objective (what hydra.sweeper.repeats.prior would learn from them), "
        "and write no report",
    )
    send = p.add_argument_group(
        "sending to tracking tools (docs/tracking.md#after-the-fact)",
        "Without a server, mlflow.db, tensorboard/ and wandb/ go into the report's folder.",
    )
    send.add_argument(
        "--to",
        action="append",
        choices=TOOLS,
        default=[],
        metavar="TOOL",
        help=f"also send every run to TOOL ({', '.join(TOOLS)}; repeat for several), under "
        "the names a live run uses; runs the tool holds already are not sent again",
    )
    send.add_argument("--mlflow-uri", default=None, metavar="URI", help="MLflow tracking URI")
    send.add_argument("--mlflow-experiment", default="rlperf", metavar="NAME")
    send.add_argument("--wandb-project", default="rlperf", metavar="NAME")
    send.add_argument("--wandb-entity", default=None, metavar="NAME")
    send.add_argument("--wandb-mode", choices=("offline", "online"), default="offline")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlperf-report`` console script; returns the exit status.

    docs/exit-codes.md: 0 report written; 2 nothing to report or a refusal the
    user can fix (no runs, ``--strict`` and mixed hardware, a bad ``--baseline``,
    a bad argument); 1 a ``--gate`` that failed, or an unexpected error (with its
    traceback); 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    missing = missing_tools(args.to)
    if missing:
        parser.exit(ExitCode.user_error, f"rlperf-report: error: {missing}\n")
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
    from rlperf.report.compare.gate import lines, parse_tolerance

    def progress(msg: str) -> None:
        print(f"rlperf-report: {msg}", file=sys.stderr, flush=True)

    try:
        paths = [_local(p, None if args.quiet else progress) for p in args.paths]
        if args.prior:
            return _prior(paths)
        result = build_report(
            paths,
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
            ObjectiveError, ConfigError) as exc:  # fmt: skip
        print(f"rlperf-report: error: {exc}", file=sys.stderr)
        return ExitCode.user_error
    for w in result.warnings:
        print(f"rlperf-report: warning: {w}", file=sys.stderr)
    for s in result.skipped:
        print(f"rlperf-report: skipped {s.path}: {s.reason}", file=sys.stderr)
    if result.gate is not None:
        units = {fam: a.unit for fam, a in result.analyses.items()}
        print("\n".join(lines(result.gate, units)))
    sent = _send(args, result, progress)
    print(result.html)
    failed = (result.gate is not None and result.gate.failed) or any(s.failed for s in sent)
    return ExitCode.failed if failed else ExitCode.completed


def _prior(paths: Sequence[Path]) -> int:
    """``--prior``: the history prior of ``paths``, a line per machine and objective; exit 2
    where none fits."""
    # Judging reads results with pandas, numpy and scipy: deferred so that `--help` loads
    # none of them.
    from rlperf.report.judge import judge_runs
    from rlperf.stats.race import History

    history = History.of(judge_runs(paths))
    print("\n".join(history.lines()) or "no run with a value")
    fits = any(not isinstance(p, str) for p in history.priors.values())
    return ExitCode.completed if fits else ExitCode.user_error


def _local(path: str, progress: Any) -> Path:
    """``path`` as a local folder: a storage URI's sweep is mirrored first
    (:func:`rlperf.results.storage.mirror`, under ``~/.cache/rlperf/storage``)."""
    if not is_uri(path):
        return Path(path)
    try:
        folder = mirror(path)
    except OSError as exc:
        raise ConfigError(f"{path.split('?', 1)[0]}: cannot be read: {exc}") from None
    if progress is not None:
        progress(f"{path.split('?', 1)[0]}: copied to {folder}")
    return folder


#: The report's files sent with ``--to`` (its pages and raster figures).
ATTACHED = (".html", ".md", ".png")


def _send(args: argparse.Namespace, result: Any, progress: Any) -> list[Any]:
    """``--to``: every cell read, and the report's pages and figures, to each tool."""
    if not args.to:
        return []
    # The tools' sinks (mlflow, tensorboardX, wandb: extras): deferred to --to.
    from rlperf.report.export.tracking import send
    from rlperf.tracking.tools import ToolSettings

    options = ToolSettings(
        mlflow_uri=args.mlflow_uri,
        mlflow_experiment=args.mlflow_experiment,
        wandb_project=args.wandb_project,
        wandb_entity=args.wandb_entity,
        wandb_mode=args.wandb_mode,
    )
    files = [result.html, result.markdown, *result.figures.values()]
    attach = [Path(f) for f in files if f is not None and Path(f).suffix in ATTACHED]
    tools = list(dict.fromkeys(args.to))
    sent = send(result.cells, tools, options, result.out, attach, progress)
    for s in sent:
        if s.failed:
            print(f"rlperf-report: warning: {s.line()}", file=sys.stderr)
    return sent


if __name__ == "__main__":
    sys.exit(main())
