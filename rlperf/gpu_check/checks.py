"""The GPU check's checks: pure functions from result folders to :class:`Check` rows.

Nothing here runs anything or imports Ray / torch: every check reads the files
a job left (``summary.json``, ``metrics.csv``, ``telemetry.csv``,
``fingerprint.json``, a sweep's ``sweep.json``) and the manifest the runner
wrote (``gpu_check.json``, :mod:`rlperf.gpu_check.sequence`). They are
unit-tested against recorded result folders (``tests/data/gpu_check/``), so a
real GPU run is not the first time they run.

What "plausible" means for the ``gpu{i}_*`` columns (docs/telemetry.md): every
value present in every row; utilisation and memory utilisation in 0-100 %;
memory used > 0 MiB (a CUDA context holds some); power > 0 W; energy rising
where the GPU has the counter (per iteration > 0 J in ``metrics.csv``,
non-decreasing and growing in ``telemetry.csv``), ``nan`` throughout where it
has none.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.layout import (
    EXCLUDED_COLUMN,
    FINGERPRINT_FILE,
    INDEX_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
)
from rlperf.results.columns import FORWARD_MS, ITER_S, LEARN_S, TIME_S
from rlperf.results.record import RolloutRecord, TrainRecord, as_record, from_json
from rlperf.telemetry.sampler import GPU_METRICS
from rlperf.vocabulary import Exclusion, RunStatus

#: The manifest the runner writes in the output folder (what ran, how it exited).
MANIFEST_FILE = "gpu_check.json"
#: Ray's resource unit: GPU shares are compared to this precision.
SHARE_TOL = 1e-6

Rows = list[dict[str, float]]


@dataclass(frozen=True)
class Check:
    """One row of the table: ``passed`` is None for a row that only informs (skipped)."""

    name: str
    expected: str
    seen: str
    passed: bool | None

    @property
    def result(self) -> str:
        return {True: "pass", False: "FAIL", None: "skip"}[self.passed]


# --------------------------------------------------------------------------- reading


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


#: The warm-up value of metrics.csv's exclusion column, read as 1.0.
EXCLUSION_MARK = str(Exclusion.warmup)


def _number(text: str) -> float:
    if text == EXCLUSION_MARK:  # a row the writer excluded (rlperf.layout.EXCLUDED_COLUMN)
        return 1.0
    if text in ("True", "False"):
        return float(text == "True")
    try:
        return float(text)
    except ValueError:
        return math.nan  # empty (CsvLog's NaN) or not a number


def read_rows(path: Path) -> Rows | None:
    """The rows of a result CSV as floats (empty and ``nan`` cells are NaN); None if missing."""
    try:
        with path.open(newline="") as f:
            return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    except OSError:
        return None


def _header(path: Path) -> list[str]:
    try:
        with path.open(newline="") as f:
            return next(csv.reader(f), [])
    except OSError:
        return []


def _fmt(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.4g}"


def _span(values: Sequence[float], unit: str) -> str:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "nan"
    lo, hi = min(finite), max(finite)
    return f"{_fmt(lo)}{unit}" if lo == hi else f"{_fmt(lo)}-{_fmt(hi)}{unit}"


# ------------------------------------------------------------------ one training job


def status_check(label: str, summary: dict[str, Any] | None) -> Check:
    """The job completed (``summary.json`` ``status``)."""
    if summary is None:
        return Check(f"{label}: status", RunStatus.completed, "no summary.json", False)
    record = from_json(summary)
    status = str(record.status)
    seen = status if record.error is None else f"{status}: {record.error}"
    return Check(f"{label}: status", RunStatus.completed, seen[:120], status == RunStatus.completed)


def learner_check(label: str, run: TrainRecord, plan: dict[str, Any]) -> Check:
    """The learner(s) ran where and on what the plan says: CUDA when it gives them GPUs."""
    wanted = "cuda" if float(plan["driver_gpus"]) > 0 else "cpu"
    count = max(int(plan["num_learners"]), 1)
    where = "remote actors" if int(plan["num_learners"]) > 0 else "driver"
    per = float(plan["gpus_per_learner"])
    expected = f"{count} x {wanted} ({where}" + (f", {per:g} GPU each)" if per else ")")
    info = run.learner
    if not isinstance(info, dict) or not info.get("learners"):
        return Check(f"{label}: learner device", expected, "not recorded", False)
    learners = list(info["learners"])
    devices = [str(x.get("device")) for x in learners]
    shares = [x.get("gpus") for x in learners]
    seen = f"{len(learners)} x {'/'.join(sorted(set(devices)))} ({info.get('where')}"
    if any(shares):  # Ray's share, where Ray placed the learner (an actor)
        seen += f", {'/'.join(sorted({f'{s:g}' for s in shares if s is not None}))} GPU each"
    ok = (
        len(learners) == count
        and info.get("where") == where
        and all(d.split(":")[0] == wanted for d in devices)
        and all(s is None or abs(float(s) - per) <= SHARE_TOL for s in shares)
    )
    return Check(f"{label}: learner device", expected, seen + ")", ok)


def env_runner_check(label: str, run: TrainRecord, plan: dict[str, Any]) -> Check:
    """Every env runner got the GPU share the plan schedules, and its module sits there."""
    n = int(plan["num_env_runners"])
    share = float(plan["gpus_per_worker_scheduled"])
    wanted = "cuda" if share > 0 else "cpu"
    expected = f"{n} x GPU {share:g} on {wanted}"
    info = run.env_runners
    if not isinstance(info, dict) or "runners" not in info:
        return Check(f"{label}: env runner GPU share", expected, "not recorded", False)
    runners = list(info["runners"])
    got = [r.get("gpus") for r in runners]
    devices = sorted({str(r.get("device")).split(":")[0] for r in runners})
    seen = f"{len(runners)} x GPU {'/'.join(sorted({_share(g) for g in got})) or '-'}"
    seen += f" on {'/'.join(devices) or '-'}"
    ok = (
        len(runners) == n
        and all(g is not None and abs(float(g) - share) <= SHARE_TOL for g in got)
        and all(str(r.get("device")).split(":")[0] == wanted for r in runners)
    )
    return Check(f"{label}: env runner GPU share", expected, seen, ok)


def _share(value: Any) -> str:
    return "none" if value is None else f"{float(value):g}"


def gpu_value_checks(
    label: str,
    file: str,
    rows: Rows | None,
    header: Sequence[str],
    gpus: Iterable[int],
    busy: Sequence[tuple[float, float]] | None = None,
) -> list[Check]:
    """``gpu{i}_*`` columns of ``metrics.csv`` / ``telemetry.csv`` filled and plausible.

    ``gpus``: the GPUs the job monitored (its layout's visible GPUs); none means
    the file must have no GPU column. Two rows per GPU: the values, the energy.
    ``busy``: for ``telemetry.csv``, the ``time_s`` windows in which the job
    used the GPUs (the training iterations); memory used must be > 0 in the
    samples inside them and in at least one sample, and >= 0 elsewhere (an idle
    GPU before Ray starts may report 0 MiB). ``None``: > 0 in every row.
    """
    gpus = list(gpus)
    name = f"{label}: {file}"
    if rows is None:
        return [Check(f"{name} GPU columns", "file present", "missing", False)]
    present = [c for c in header if c.startswith("gpu")]
    if not gpus:
        seen = ", ".join(present) if present else "none"
        return [Check(f"{name} GPU columns", "none (no GPU visible)", seen, not present)]
    if not rows:
        return [Check(f"{name} GPU columns", "rows", "0 rows", False)]
    checks = []
    per_iteration = file == METRICS_FILE
    for i in gpus:
        missing = [f"gpu{i}_{m}" for m in GPU_METRICS if f"gpu{i}_{m}" not in header]
        if missing:
            checks.append(Check(f"{name} gpu{i}", f"gpu{i}_* columns", f"no {missing}", False))
            continue
        checks.append(_values_check(f"{name} gpu{i}", rows, i, busy))
        energy = [r[f"gpu{i}_energy_j"] for r in rows]
        checks.append(_energy_check(f"{name} gpu{i} energy", energy, per_iteration))
    return checks


def _values_check(
    name: str, rows: Rows, i: int, busy: Sequence[tuple[float, float]] | None
) -> Check:
    col = {m: [r[f"gpu{i}_{m}"] for r in rows] for m in GPU_METRICS}
    rules = (
        ("util_pct", lambda v: 0 <= v <= 100, "util in 0-100 %"),
        ("mem_util_pct", lambda v: 0 <= v <= 100, "mem util in 0-100 %"),
        ("power_w", lambda v: v > 0, "power > 0"),
    )
    bad = []
    for metric, ok, _ in rules:
        for k, v in enumerate(col[metric], start=1):
            if math.isnan(v) or not ok(v):
                bad.append(f"row {k}: {metric}={_fmt(v)}")
    for k, (row, v) in enumerate(zip(rows, col["mem_used_mb"], strict=True), start=1):
        in_use = busy is None or any(t0 <= row[TIME_S] <= t1 for t0, t1 in busy)
        if math.isnan(v) or v < 0 or (in_use and v == 0):
            bad.append(f"row {k}: mem_used_mb={_fmt(v)}" + (" while training" if busy else ""))
    if not any(v > 0 for v in col["mem_used_mb"]):
        bad.append("mem_used_mb 0 in every row")
    mem = "mem used > 0" + (" while training" if busy is not None else "")
    expected = "filled; " + ", ".join([*(text for _, _, text in rules), mem])
    if bad:
        more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
        return Check(name, expected, "; ".join(bad[:2]) + more, False)
    seen = (
        f"{len(rows)} rows: util {_span(col['util_pct'], ' %')}, "
        f"mem {_span(col['mem_used_mb'], ' MiB')}, power {_span(col['power_w'], ' W')}"
    )
    return Check(name, expected, seen, True)


def _energy_check(name: str, energy: Sequence[float], per_iteration: bool) -> Check:
    expected = (
        "> 0 J every iteration (nan without counter)"
        if per_iteration
        else "cumulative, rising (nan without counter)"
    )
    nans = sum(math.isnan(e) for e in energy)
    if nans == len(energy):
        return Check(name, expected, "nan throughout: no energy counter", True)
    if nans:
        return Check(name, expected, f"nan in {nans} of {len(energy)} rows only", False)
    if per_iteration:
        bad = [f"iteration {k}: {_fmt(e)} J" for k, e in enumerate(energy, start=1) if e <= 0]
        seen = "; ".join(bad) if bad else "per iteration " + ", ".join(_fmt(e) for e in energy)
        return Check(name, expected, seen + ("" if bad else " J"), not bad)
    drops = [
        f"row {k + 1}: {_fmt(a)} -> {_fmt(b)} J"
        for k, (a, b) in enumerate(zip(energy, energy[1:], strict=False), start=1)
        if b < a
    ]
    if drops:
        return Check(name, expected, "decreases at " + "; ".join(drops[:2]), False)
    grew = energy[-1] > energy[0]
    seen = f"{_fmt(energy[0])} -> {_fmt(energy[-1])} J over {len(energy)} samples"
    return Check(name, expected, seen if grew else seen + " (never grew)", grew)


def _plan_of(folder: Path) -> dict[str, Any] | None:
    """The resource plan a training job recorded (None without one)."""
    summary = read_json(folder / SUMMARY_FILE)
    return as_record(from_json(summary), TrainRecord).resource_plan if summary else None


def training_checks(label: str, folder: Path) -> list[Check]:
    """Every check of one training job folder (a single run or a sweep cell)."""
    summary = read_json(folder / SUMMARY_FILE)
    checks = [status_check(label, summary)]
    if summary is None:
        return checks
    run = as_record(from_json(summary), TrainRecord)
    plan = run.resource_plan
    if not isinstance(plan, dict):
        return [*checks, Check(f"{label}: resource plan", "recorded", "missing", False)]
    checks += [learner_check(label, run, plan), env_runner_check(label, run, plan)]
    gpus = [int(i) for i in plan["visible_gpus"]]
    metrics = read_rows(folder / METRICS_FILE)
    checks += gpu_value_checks(label, METRICS_FILE, metrics, _header(folder / METRICS_FILE), gpus)
    path = folder / TELEMETRY_FILE
    busy = iteration_windows(metrics or [])
    checks += gpu_value_checks(label, TELEMETRY_FILE, read_rows(path), _header(path), gpus, busy)
    return checks


def iteration_windows(metrics: Rows) -> list[tuple[float, float]]:
    """The ``time_s`` span of every training iteration (``metrics.csv``: end and ``iter_s``)."""
    return [(r[TIME_S] - r[ITER_S], r[TIME_S]) for r in metrics]


# -------------------------------------------------------------- across training jobs


def learn_s(rows: Rows) -> float:
    """The learn phase of a job: median ``learn_s`` of its non-warm-up iterations.

    The first iteration of a GPU learner pays CUDA's start-up (context, kernel
    loading), so the jobs are run with ``train.warmup_iterations=1``; a job whose
    iterations are all warm-up gives its last one.
    """
    # `excluded` (warmup: 1.0 by _number; empty: NaN); rlperf 0.1 wrote a boolean `warmup`.
    steady = [r[LEARN_S] for r in rows if not (r.get(EXCLUDED_COLUMN, 0) == 1.0 or r.get("warmup"))]
    values = steady or [rows[-1][LEARN_S]]
    return float(statistics.median(values))


def learn_speed_checks(jobs: dict[str, Path]) -> list[Check]:
    """GPU learners beat the CPU learner (``driver_gpus == 0``) in the learn phase.

    ``jobs``: label -> training job folder, the CPU baseline among them.
    """
    timed: dict[str, tuple[float, float]] = {}  # label -> (driver GPUs, learn_s)
    for label, folder in jobs.items():
        plan = _plan_of(folder)
        rows = read_rows(folder / METRICS_FILE)
        if isinstance(plan, dict) and rows:
            timed[label] = (float(plan["driver_gpus"]), learn_s(rows))
    base = next(((k, t) for k, (g, t) in timed.items() if g == 0), None)
    checks = []
    for label in jobs:
        if label in timed and timed[label][0] == 0:
            continue
        name = f"{label}: learn phase vs CPU"
        if base is None:
            checks.append(Check(name, "faster than the CPU learner", "no CPU baseline", False))
            continue
        expected = f"< {base[1]:.3f} s ({base[0]})"
        if label not in timed:
            checks.append(Check(name, expected, "no metrics", False))
            continue
        t = timed[label][1]
        seen = f"{t:.3f} s ({base[1] / t:.1f}x)" if t > 0 else f"{t:.3f} s"
        checks.append(Check(name, expected, seen, t < base[1]))
    return checks


# ------------------------------------------------------------------- rollout, sweep


def rollout_checks(label: str, folder: Path) -> list[Check]:
    """A rollout with ``rollout.device=cuda``: it completed, acted on CUDA, passed its probe."""
    summary = read_json(folder / SUMMARY_FILE)
    checks = [status_check(label, summary)]
    if summary is None:
        return checks
    run = as_record(from_json(summary), RolloutRecord)
    device = str((run.executor or {}).get("device"))
    checks.append(Check(f"{label}: policy device", "cuda", device, device.startswith("cuda")))
    probe = run.probe
    if isinstance(probe, dict):
        err, tol = float(probe["max_abs_logit_err"]), float(probe["tolerance"])
        agreement = probe["greedy_agreement"]
        seen = f"max |logit err| {err:.2g} (tolerance {tol:g}), agreement {agreement}"
        checks.append(Check(f"{label}: probe on the GPU", "same logits", seen, err <= tol))
    else:
        checks.append(Check(f"{label}: probe on the GPU", "same logits", "not recorded", False))
    forward = (run.latency.get(FORWARD_MS) or {}).get("p50")
    steps = int(run.steps or 0)
    ok = steps > 0 and forward is not None and math.isfinite(float(forward))
    seen = f"{steps} steps, forward p50 {forward if forward is None else f'{forward:.3f}'} ms"
    checks.append(Check(f"{label}: steps timed", "> 0 steps, forward p50", seen, ok))
    fingerprint = read_json(folder / FINGERPRINT_FILE) or {}
    layout = (fingerprint.get("config") or {}).get("gpu_layout") or {}
    gpus = [int(i) for i in layout.get("visible_gpus", [])]
    path = folder / TELEMETRY_FILE
    # When the policy sat on the GPU is not recorded: memory > 0 in some sample is asked.
    rows = read_rows(path)
    return checks + gpu_value_checks(label, TELEMETRY_FILE, rows, _header(path), gpus, [])


def request_check(label: str, record: dict[str, Any], plan: dict[str, Any]) -> Check:
    """The trial asked Tune for the plan's GPUs: learner(s) plus every env runner's share."""
    bundles = record.get("request") or []
    gpus = [float(b.get("GPU", 0.0)) for b in bundles]
    learners = float(plan["gpus_per_learner"]) * max(int(plan["num_learners"]), 1)
    wanted = learners + int(plan["num_env_runners"]) * float(plan["gpus_per_worker_scheduled"])
    seen = " + ".join(f"{g:g}" for g in gpus if g) or "0"
    ok = abs(sum(gpus) - wanted) <= SHARE_TOL * max(len(gpus), 1)
    return Check(f"{label}: Tune request GPUs", f"{wanted:g} in all", seen, ok)


def sweep_checks(label: str, folder: Path, cells: int) -> list[Check]:
    """A sweep through the Tune launcher: every cell completed, asked for and got its shares."""
    index = read_json(folder / INDEX_FILE)
    if index is None:
        return [Check(f"{label}: {INDEX_FILE}", "present", "missing", False)]
    records = sorted(index.get("cells", {}).values(), key=lambda r: int(r.get("job_num", 0)))
    done = [r for r in records if r.get("status") == RunStatus.completed]
    statuses = ", ".join(f"{r.get('subdir')}: {r.get('status')}" for r in records) or "no cells"
    checks = [
        Check(f"{label}: cells", f"{cells} completed", statuses, len(done) == cells == len(records))
    ]
    for record in records:
        sub = str(record.get("subdir"))
        cell_label = f"{label}/{sub}"
        cell_checks = training_checks(cell_label, folder / sub)
        plan = _plan_of(folder / sub)
        if isinstance(plan, dict):
            cell_checks.insert(1, request_check(cell_label, record, plan))
        checks += cell_checks
    return checks


# ---------------------------------------------------------------------- the whole run


def check_results(out: Path) -> list[Check]:
    """Every check of a GPU-check output folder, from its manifest and result files."""
    manifest = read_json(out / MANIFEST_FILE)
    if manifest is None:
        return [Check(f"{out}: {MANIFEST_FILE}", "present", "missing", False)]
    checks: list[Check] = []
    trainings: dict[str, Path] = {}
    for step in manifest.get("steps", []):
        name, kind, folder = str(step["name"]), str(step["kind"]), out / str(step["folder"])
        rc = step.get("returncode")
        checks.append(Check(f"{name}: exit status", "0", str(rc), rc == 0))
        if kind == "train":
            trainings[name] = folder
            checks += training_checks(name, folder)
        elif kind == "rollout":
            checks += rollout_checks(name, folder)
        elif kind == "sweep":
            checks += sweep_checks(name, folder, len(step.get("cells") or []))
        else:
            checks.append(Check(f"{name}: kind", "train, rollout or sweep", kind, False))
    if trainings:
        checks += learn_speed_checks(trainings)
    return checks


def format_table(checks: Sequence[Check]) -> str:
    """The checks as one plain-text table: check, expected, seen, result."""
    rows = [("check", "expected", "seen", "result")] + [
        (c.name, c.expected, c.seen, c.result) for c in checks
    ]
    widths = [max(len(r[k]) for r in rows) for k in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def failed(checks: Iterable[Check]) -> list[Check]:
    """The checks that failed (skipped rows are not failures)."""
    return [c for c in checks if c.passed is False]
