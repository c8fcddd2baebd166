"""Tracking of a running job (opened and closed by the job wrapper, :mod:`rlperf.job_wrapper`) and
of a running sweep (its MLflow parent run, by the sweep engine, :mod:`rlperf.sweep.state`).

A job learns its names from Hydra's runtime config: in a sweep, its cell label and its
sweep folder (the sweep's MLflow parent, W&B group and TensorBoard folder); the same names
:mod:`rlperf.tracking.record` reads from a folder afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.console import TERMINAL
from rlperf.errors import ConfigError
from rlperf.layout import INDEX_FILE, SEARCH_FILE
from rlperf.results.record import RunRecord
from rlperf.tracking.dispatch import Incident, Tracking, first_line
from rlperf.tracking.record import job_of, sweep_ref
from rlperf.tracking.redact import Redactor
from rlperf.tracking.tools import SETTING, ToolSettings, check_tools, enabled_tools, make_sink
from rlperf.vocabulary import RunStatus

log = logging.getLogger("rlperf")


def hydra_runtime() -> dict[str, Any]:
    """What Hydra's runtime config says of this job (empty outside a Hydra run)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return {}
    hc = HydraConfig.get()
    return {
        "multirun": hc.mode == RunMode.MULTIRUN,
        "num": _job_num(hc),
        "overrides": list(hc.overrides.task),
        "sweep_dir": str(hc.sweep.dir),
        "cwd": str(hc.runtime.cwd),
    }


def _job_num(hc: Any) -> Any:
    """Hydra's job number (``???`` outside a multirun)."""
    try:
        return hc.job.num
    except Exception:  # omegaconf's MissingMandatoryValue: a single run
        return None


def open_tracking(
    cfg: DictConfig,
    out_dir: Path,
    config: dict[str, Any],
    fingerprint: Mapping[str, Any],
    record: RunRecord,
    incident: Incident,
) -> Tracking | None:
    """The job's tracking, or None when ``tracking`` picks no tool (or it cannot be opened:
    an incident, and the job goes on). ``record``: the job's summary, with its env protocol."""
    tracking = OmegaConf.select(cfg, "tracking")
    tools = enabled_tools(tracking)
    if not tools:
        return None
    try:
        protocol = record.env_protocol
        job = job_of(str(cfg.stage), out_dir.resolve(), config, fingerprint, protocol,
                     hydra_runtime())  # fmt: skip
        settings = ToolSettings.of(tracking)
        store = job.sweep.folder if job.sweep is not None else job.folder
        sinks = {tool: (partial(make_sink, tool, settings, store), SETTING[tool]) for tool in tools}
        return Tracking(job, sinks, incident)
    except Exception as exc:  # noqa: BLE001 - tracking never stops a job
        incident(
            "tracking_failed",
            f"tracking: {', '.join(tools)} could not start: {type(exc).__name__}: "
            f"{first_line(exc)}; the job goes on without it (its files are complete)",
            "tracking",
        )
        return None


@contextlib.contextmanager
def sweep_tracking(config: DictConfig) -> Iterator[None]:
    """A sweep's (or search's) MLflow parent run around its run: found by the sweep's
    identity (a resumed sweep reuses it) or created; ended with the sweep's outcome
    (finished, killed by a stop signal, failed) and its ``sweep.json`` (a search's
    ``search.json`` too)."""
    tracking = OmegaConf.select(config, "tracking")
    try:
        check_tools(tracking)  # a missing extra: the pre-flight refuses the cells, says why
    except ConfigError:
        tracking = None
    if "mlflow" not in enabled_tools(tracking):
        yield
        return
    # mlflow: deferred, a launcher that tracks with no tool never imports it.
    from rlperf.tracking.mlflow_sink import MlflowSink

    cwd = str(OmegaConf.select(config, "hydra.runtime.cwd", default=None) or Path.cwd())
    sweep = sweep_ref(socket.gethostname(), cwd, str(config.hydra.sweep.dir))
    try:
        sink = make_sink("mlflow", ToolSettings.of(tracking), sweep.folder)
        assert isinstance(sink, MlflowSink)
        run_id = sink.parent(sweep)
        assert run_id is not None
        sink.reopen_parent(run_id)
    except Exception as exc:  # noqa: BLE001 - tracking never stops a sweep
        where = tracking.mlflow.uri or sweep.folder
        message = f"tracking: mlflow ({where}) failed: {first_line(exc)}; each cell tries itself"
        log.warning("%s", Redactor().text(message))  # a URI's password masked
        yield
        return
    status = RunStatus.completed
    try:
        yield
    except KeyboardInterrupt:
        status = RunStatus.interrupted
        raise
    except BaseException:
        status = RunStatus.failed
        raise
    finally:
        files = [sweep.folder / name for name in (INDEX_FILE, SEARCH_FILE)]
        try:
            sink.end_parent(run_id, status, [f for f in files if f.is_file()])
        except Exception as exc:  # noqa: BLE001
            message = f"tracking: mlflow: ending the sweep's run failed: {first_line(exc)}"
            log.warning("%s", Redactor().text(message), extra={TERMINAL: False})
