"""The job wrapper every stage runs in (lightning-hydra-template's ``task_wrapper`` idea).

It validates the config before anything expensive starts, checks feasibility,
writes ``fingerprint.json``, runs background telemetry, and always writes
``summary.json`` with a :class:`~rlperf.vocabulary.RunStatus`: ``completed``;
``invalid`` or ``skipped`` when the run is refused before it starts (a wrong
config; a machine that cannot run it), with the reason and ``preflight: true``;
``skipped`` when the stage finds it cannot run here (:class:`SkipCell`);
``invalid`` when the stage finds an input wrong (a
:class:`~rlperf.errors.UserError` such as a checkpoint that does not load);
``failed`` (with the error and traceback) or ``interrupted`` (Ctrl-C, SIGTERM, SIGHUP) — keeping
every row already flushed by the stage. The exception goes on to the caller,
which maps it to the exit status (docs/exit-codes.md); only a skip inside a
sweep's trial ends here.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlperf.algos import plan_resources
from rlperf.console import TERMINAL, current
from rlperf.console.deprecations import watching
from rlperf.envs.factory import built_env_facts
from rlperf.errors import (
    ConfigError,
    InfeasibleError,
    ResultsWriteError,
    SkipCell,
    TrialStopped,
    UserError,
    error_line,
    interrupt_reason,
    raise_if_interrupted,
)
from rlperf.layout import FINGERPRINT_FILE, SUMMARY_FILE, TELEMETRY_FILE
from rlperf.resources.plan import Machine, ResourcePlan, check_feasibility, detect_machine
from rlperf.resources.ray_session import applied_placement
from rlperf.results.columns import ENV_STEPS
from rlperf.results.protocol import (
    OBSERVATION_CAST,
    SIMULATOR,
    SIMULATOR_VERSION,
    env_protocol,
)
from rlperf.results.record import RunRecord, record_class
from rlperf.specs.stages import EnvSource, stage_spec
from rlperf.telemetry.fingerprint import collect_fingerprint, write_fingerprint
from rlperf.telemetry.sampler import TelemetrySampler
from rlperf.tracking.dispatch import CLOSE_WAIT_S, INTERRUPTED_CLOSE_WAIT_S
from rlperf.tracking.live import open_tracking
from rlperf.tracking.record import artifact_paths, env_tags
from rlperf.tracking.redact import Redactor, scrub_hydra_files
from rlperf.validation.validate import validate_config
from rlperf.vocabulary import RunStatus

log = logging.getLogger("rlperf")

#: Set to "1" by the sweep launcher (hydra_plugins/rlperf_tune_launcher) in the
#: process of a Ray Tune trial: see ``in_trial`` of :func:`execute_stage`.
IN_TRIAL_ENV = "RLPERF_IN_TUNE_TRIAL"


def running_in_trial() -> bool:
    """Whether this process runs a cell of a sweep (a Ray Tune trial of the launcher)."""
    return os.environ.get(IN_TRIAL_ENV) == "1"


@dataclass
class JobContext:
    """What a stage gets besides its config: resources, telemetry, partial results."""

    out_dir: Path
    plan: ResourcePlan
    machine: Machine
    gpu_indices: list[int]
    record: RunRecord  # summary.json as the job learns it (written at the start and the end)
    sampler: Any | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    label: str = "rlperf"  # the stage, in progress lines
    display: Any | None = None  # the run's progress display, opened by the first step
    # What runs now, since when, and when the terminal last heard of it (Heartbeat).
    phase: str = "starting"
    phase_since: float = field(default_factory=time.monotonic)
    last_line: float = field(default_factory=time.monotonic)
    steps_done: str = ""
    tracking: Any | None = None  # rlperf.tracking.dispatch.Tracking, when tracking picks tools

    @classmethod
    def for_job(cls, cfg: DictConfig, out_dir: Path) -> JobContext:
        """The context of a job of ``cfg``: its resource plan, this machine, a fresh summary."""
        plan = plan_resources(cfg)
        machine = detect_machine()
        record = _new_record(cfg, RunStatus.running)
        gpu_indices = [i for i in plan.visible_gpus if i < machine.gpus]
        return cls(out_dir, plan, machine, gpu_indices, record, label=str(cfg.stage))

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def telemetry_now(self) -> float:
        """A time mark for :meth:`telemetry_window` (reads the GPU energy counters too)."""
        return self.sampler.mark() if self.sampler is not None else self.elapsed_s()

    def telemetry_window(self, t0: float, t1: float) -> dict[str, float]:
        return self.sampler.window(t0, t1) if self.sampler is not None else {}

    def progress(self, message: str) -> None:
        """One progress line for the person (:func:`rlperf.console.current`) and the job log."""
        log.info(message, extra={TERMINAL: False})
        current().say(f"[rlperf {self.elapsed_s():7.1f}s] {message}", progress=True)
        self._now_running(message)

    def _now_running(self, phase: str) -> None:
        self.phase, self.phase_since = phase, time.monotonic()
        self.last_line = self.phase_since

    def incident(self, kind: str, message: str, setting: str | None = None) -> None:
        """A problem that does not stop the job: one warning line on the terminal and an
        entry ``{kind, at, message, setting}`` of ``summary.json``'s ``incidents``
        (``at``: UTC time; ``setting``: the key that governs it, if one does)."""
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entry = {"kind": kind, "at": at, "message": message, "setting": setting}
        self.record.incidents = [*self.record.incidents, entry]
        log.warning("%s", message)

    def step(
        self,
        done: int,
        total: int,
        info: str,
        brief: str = "",
        unit: str = "iteration",
        row: Mapping[str, Any] | None = None,
        fraction: float | None = None,
    ) -> None:
        """Step ``done`` of ``total`` finished; ``info`` says what it measured, ``brief`` in short.

        ``fraction``: how much of the run is done when ``total`` is only a cap (a
        training run that a budget of env steps or seconds ends first); the ETA
        follows it. Default ``done / total``.

        Goes to the run's progress display (a bar shows ``brief``), the job log
        and, in a sweep's trial, to the launcher (:func:`reporting_steps`) with the
        step's ``row`` of results (a training iteration's metrics.csv row), which
        the launcher reports to Tune so that a search's scheduler can act on it.
        """
        log.info("%s %d/%d: %s", unit, done, total, info, extra={TERMINAL: False})
        if row is not None:
            self.track(row)
        raise_if_interrupted()  # a Ctrl-C Python swallowed in a finalizer (rlperf.errors)
        if self.display is None:
            self.open_display(total, unit)
        assert self.display is not None
        self.display.update(done, info, brief or info, fraction)
        sink = STEP_SINK.get()
        if sink is not None:
            sink(done, total, brief or info, row)
        self.steps_done = f"{done} of {total} {unit}s done"
        if self.rows and ENV_STEPS in self.rows[-1]:
            self.steps_done += f", {sum(int(r[ENV_STEPS]) for r in self.rows)} env steps"
        self._now_running(f"{unit} {done + 1} of {total}" if done < total else "finishing")

    def track(self, row: Mapping[str, Any]) -> None:
        """A result row the stage wrote (a training iteration, an episode's latency window,
        a serve level) to the tools ``tracking`` picked, in the background (docs/tracking.md)."""
        if self.tracking is not None:
            self.tracking.row(row)

    def open_display(self, total: int, unit: str = "iteration") -> None:
        """Show the run's progress (a bar on a terminal) from now on: before its first step."""
        self.close_display()
        display = current().run_progress(self.label, total, unit, self.started)
        self.display = display.__enter__()

    def close_display(self) -> None:
        if self.display is not None:
            self.display.__exit__(None, None, None)
            self.display = None


#: A stage's entry point (named by its spec, rlperf.specs.stages): config, job folder and
#: context in, the job's record (``ctx.record``, filled) out.
StageFunction = Callable[[DictConfig, Path, JobContext], RunRecord]

#: Called with ``(done, total, info, row)`` at every :meth:`JobContext.step` (``row`` is
#: None for steps without one).
StepSink = Callable[[int, int, str, Mapping[str, Any] | None], None]

#: The step sink of the job running in this context: a sweep's trial sets it around its
#: job (:func:`reporting_steps`) to show each cell's progress and report its rows to Tune.
#: A context variable, not a list: Hydra's task function takes the config alone, so the
#: trial cannot hand the sink to the job it runs; the variable holds it for that call only.
STEP_SINK: ContextVar[StepSink | None] = ContextVar("rlperf_step_sink", default=None)


@contextlib.contextmanager
def reporting_steps(sink: StepSink) -> Iterator[None]:
    """Every step of the job run inside this block goes to ``sink`` too."""
    token = STEP_SINK.set(sink)
    try:
        yield
    finally:
        STEP_SINK.reset(token)


def execute_stage(
    cfg: DictConfig, out_dir: Path, stage: StageFunction, *, in_trial: bool | None = None
) -> RunRecord:
    """Validate, check feasibility, then run ``stage`` with fingerprint, telemetry and summary.

    ``in_trial``: the job runs inside a Ray Tune trial of the sweep launcher
    (default: ``RLPERF_IN_TUNE_TRIAL=1`` in the environment). Ray then already
    gave this process its GPUs (``CUDA_VISIBLE_DEVICES``) and affinity mask, and
    the launcher checked feasibility against Ray's resources, so neither is
    applied nor re-checked here (re-applying would undo Ray's GPU assignment).
    """
    if in_trial is None:
        in_trial = running_in_trial()
    try:
        validate_config(cfg)
        ctx = JobContext.for_job(cfg, out_dir)
        if not in_trial:  # a trial's launcher checked the cell against Ray's resources
            check_stage_feasible(cfg, ctx)
    except (ConfigError, InfeasibleError) as exc:
        status = RunStatus.invalid if isinstance(exc, ConfigError) else RunStatus.skipped
        log.error("%s before start: %s", status, exc, extra={TERMINAL: False})
        write_refused_summary(out_dir, cfg, status, str(exc))
        raise
    out_dir.mkdir(parents=True, exist_ok=True)
    record = ctx.record
    resolved, redactor = _masked_config(cfg, out_dir)
    sampler = None
    try:
        # Visible GPUs and the affinity mask hold for the whole stage (and the Ray
        # it starts); the fingerprint records the mask in force.
        with nullcontext() if in_trial else applied_placement(ctx.plan), watching():
            fingerprint = collect_fingerprint(resolved)
            write_fingerprint(out_dir / FINGERPRINT_FILE, fingerprint)
            record_env_protocol(record, resolved)  # a job killed mid-run keeps it too
            record.write(out_dir)
            masked = _masked(ctx, redactor)
            ctx.tracking = open_tracking(cfg, out_dir, resolved, fingerprint, record, masked)
            sampler = _start_telemetry(cfg, out_dir, ctx.gpu_indices, ctx.started)
            ctx.sampler = sampler
            with Heartbeat(ctx, float(cfg.console.heartbeat_s)):
                # The stage fills the job's record and returns it (a view of the same file).
                record = ctx.record = stage(cfg, out_dir, ctx)
        record.mark(RunStatus.completed, record.error)
    except SkipCell as exc:
        record.mark(RunStatus.skipped, str(exc))
        log.warning("skipped: %s", exc, extra={TERMINAL: False})
        if not in_trial:  # a single run that cannot run here: exit 2 (rlperf.errors)
            raise
    except UserError as exc:  # an input the stage found wrong (a checkpoint, a model file)
        record.mark(RunStatus.invalid, error_line(exc), traceback.format_exc())
        log.error("invalid: %s", exc, extra={TERMINAL: False})
        raise
    except TrialStopped:
        record.mark(RunStatus.stopped_early, "stopped by the search's scheduler")
        raise
    except KeyboardInterrupt:
        record.mark(RunStatus.interrupted, interrupt_reason())
        raise
    except BaseException as exc:
        full = _disk_full(exc, out_dir, len(ctx.rows))
        record.mark(RunStatus.failed, error_line(full or exc), traceback.format_exc())
        log.error("failed: %s", record.error, exc_info=True, extra={TERMINAL: False})
        if full is not None:
            raise full from exc
        raise
    finally:
        ctx.close_display()
        if sampler is not None:
            sampler.stop()
            record.cpu_energy = sampler.cpu_energy_record()
        record_env_protocol(record, resolved)
        record.wall_s = ctx.elapsed_s()
        if stage_spec(record.stage).trains and record.iterations is None:
            record.iterations = len(ctx.rows)  # a downstream job has steps, not iterations
        _write_final_summary(RunRecord(redactor.tree(record.data)), out_dir)
        _close_tracking(ctx, out_dir, redactor)
    return record


def check_stage_feasible(cfg: DictConfig, ctx: JobContext) -> None:
    """What the stage will ask of this machine fits (:class:`InfeasibleError` naming the
    keys), as its spec's ``feasibility`` says: training's env runners and learners, serve's
    replicas, the env stage's threads."""
    check = stage_spec(cfg.stage).feasibility
    if check is not None:
        check_feasibility(check, cfg, ctx.plan, ctx.machine, bool(cfg.ray.overcommit_cpus))


def _masked_config(cfg: DictConfig, out_dir: Path) -> tuple[dict[str, Any], Redactor]:
    """The resolved config with its secrets masked (the fingerprint, summary and tracking
    get this one), the redactor that masks them, and Hydra's ``.hydra/`` copy masked too."""
    resolved = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    redactor = Redactor.of(resolved)
    scrub_hydra_files(out_dir, redactor)
    return redactor.tree(resolved), redactor


def _masked(ctx: JobContext, redactor: Redactor) -> Callable[..., None]:
    """``ctx.incident`` with its message's secrets masked (a tool's error may quote its URI)."""
    return lambda kind, message, setting=None: ctx.incident(kind, redactor.text(message), setting)


def _close_tracking(ctx: JobContext, out_dir: Path, redactor: Redactor) -> None:
    """Send the result files and end the job's tracked runs (at most CLOSE_WAIT_S); then
    ``summary.json`` says which tools got the job, how long closing took, and any tool
    that failed meanwhile (an incident). Nothing without tracking."""
    if ctx.tracking is None:
        return
    t0, status = time.monotonic(), str(ctx.record.status)
    # A stop signal's exit keeps within a scheduler's grace period (docs/exit-codes.md).
    wait_s = INTERRUPTED_CLOSE_WAIT_S if status == RunStatus.interrupted else CLOSE_WAIT_S
    ctx.tracking.close(status, artifact_paths(out_dir), env_tags(ctx.record), wait_s)
    ctx.record.tracking = {
        "tools": ctx.tracking.tools,
        "failed": ctx.tracking.failed,
        "close_s": time.monotonic() - t0,
    }
    with contextlib.suppress(OSError):  # the summary written before stands
        RunRecord(redactor.tree(ctx.record.data)).write(out_dir)


def _write_final_summary(record: RunRecord, out_dir: Path) -> None:
    """``summary.json`` as the job ended. A full disk: said in the job log; an error of its
    own only where the job completed (where it failed, its error says more)."""
    try:
        record.write(out_dir)
    except OSError as exc:
        log.error("cannot write %s: %s", out_dir / SUMMARY_FILE, exc, extra={TERMINAL: False})
        if record.completed:
            raise ResultsWriteError(
                f"cannot write {out_dir / SUMMARY_FILE}: {exc.strerror or exc}; the job "
                f"completed and its other result files are written"
            ) from exc


def _disk_full(exc: BaseException, out_dir: Path, rows: int) -> ResultsWriteError | None:
    """A full disk (or quota) met outside rlperf's own row writers (RLlib's checkpoint, a
    library's file) as one line naming the folder; None for any other error."""
    if isinstance(exc, ResultsWriteError) or not isinstance(exc, OSError):
        return None
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    return ResultsWriteError(
        f"no space left on the disk of {out_dir} ({str(exc).splitlines()[0]}); the {rows} "
        f"row(s) written before are kept"
    )


class Heartbeat:
    """While a job runs: a line whenever ``every_s`` seconds passed without a progress line
    (``console.heartbeat_s``; 0 = never), saying what runs, since when and what is done, so
    that a phase that takes long (Ray's start, an evaluation, a hung env) is never silent."""

    def __init__(self, ctx: JobContext, every_s: float) -> None:
        self.ctx, self.every_s = ctx, every_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rlperf-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        if self.every_s > 0:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)

    def _run(self) -> None:
        ctx = self.ctx
        while not self.stopped.wait(min(1.0, self.every_s)):
            now = time.monotonic()
            if now - ctx.last_line < self.every_s:
                continue
            since = time.strftime("%H:%M:%S", time.localtime(time.time() - (now - ctx.phase_since)))
            done = f"; {ctx.steps_done}" if ctx.steps_done else ""
            line = (
                f"still running: {ctx.phase} (since {since}, {now - ctx.phase_since:.0f} s){done}"
            )
            log.info(line, extra={TERMINAL: False})
            current().say(f"[rlperf {ctx.elapsed_s():7.1f}s] {line}", progress=True)
            ctx.last_line = now


def record_env_protocol(record: RunRecord, resolved: Mapping[str, Any]) -> None:
    """``record.env_protocol``: what an env step of this job is (rlperf.results.protocol).

    Of the env the job played: a training job's is its config's ``env``; a rollout or
    edge job plays the upstream run's env with the command line's ``env.*`` on top, which
    the stage records as ``record.env`` (none yet if it failed before resolving the
    run: then no protocol either). A serve job plays no env. Written in every outcome, so
    a failed or interrupted training still says what it was training on.
    """
    source, env = stage_spec(record.stage).env_source, record.env
    if source == EnvSource.none:
        return
    if not isinstance(env, Mapping):
        env = resolved.get("env") if source == EnvSource.config else None
    if isinstance(env, Mapping):
        protocol = env_protocol(env)
        facts = built_env_facts(env)  # float64 observations: cast where they meet the model
        if facts.observation_cast is not None:
            protocol[OBSERVATION_CAST] = facts.observation_cast
        if facts.simulator is not None:  # a MuJoCo env's settings, which its id hides
            protocol[SIMULATOR], protocol[SIMULATOR_VERSION] = (
                facts.simulator,
                facts.simulator_version,
            )
        record.env_protocol = protocol


def _new_record(cfg: Any, status: RunStatus) -> RunRecord:
    """The keys every ``summary.json`` starts with."""
    stage = str(OmegaConf.select(cfg, "stage"))
    return record_class(stage).new(stage, str(OmegaConf.select(cfg, "backend.name")), status)


def write_refused_summary(out_dir: Path, cfg: Any, status: str, reason: str) -> Path:
    """``summary.json`` of a run refused before its stage started (``invalid`` / ``skipped``).

    So that its folder explains itself: a user and the report can tell it from a
    crashed run. Written by the job wrapper and by the sweep pre-flight.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    record = _new_record(cfg, RunStatus(status))
    record.error, record.wall_s, record.iterations, record.preflight = reason, 0.0, 0, True
    return record.write(out_dir)


def _start_telemetry(
    cfg: DictConfig, out_dir: Path, gpu_indices: list[int], time_origin: float
) -> Any | None:
    if not cfg.telemetry.enabled:
        return None

    sampler = TelemetrySampler(
        out_dir / TELEMETRY_FILE,
        interval_s=float(cfg.telemetry.interval_s),
        gpu_indices=gpu_indices,
        time_origin=time_origin,  # telemetry.csv and metrics.csv share "seconds since job start"
        powercap=Path(cfg.telemetry.powercap) if cfg.telemetry.powercap else None,
    )
    sampler.start()
    return sampler
