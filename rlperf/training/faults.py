"""Faults during training: env runners or learners lost or restarted, iterations without samples.

RLlib's fault tolerance (``restart_failed_env_runners``, on by default) keeps a
run going when an env runner dies: the iteration it dies in samples less or
nothing, the next one restarts it. Neither measures the configuration, so each
iteration records the health of its workers (:data:`~rlperf.results.columns.FAULT_COLUMNS`)
and one that a fault touched, or that sampled nothing, is excluded from the
summaries and rankings like warm-up (``excluded``: ``fault`` / ``no_samples``;
the row stays in ``metrics.csv``) and listed in ``summary.json["faults"]``.
``train.on_fault=fail`` ends the run at such an iteration instead (status
failed, exit 1). Counters read (Ray 2.60): the result's ``fault_tolerance``
entry (``num_healthy_workers``, ``num_remote_worker_restarts``) and, for remote
learners, the learner group's actor manager (a private attribute; absent
learners count as healthy). A worker Ray's memory monitor killed is named as such
(``oom_kills``, from the exit causes in Ray's worker table).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from rlperf.errors import RunFault
from rlperf.layout import EXCLUDED_COLUMN
from rlperf.resources.plan import ResourcePlan
from rlperf.results.columns import (
    ENV_RUNNER_RESTARTS,
    ENV_RUNNERS_HEALTHY,
    ENV_RUNNERS_LOST,
    ENV_STEPS,
    FAULT_COLUMNS,
    ITERATION,
    LEARNER_FAILURES,
    OOM_KILLS,
)
from rlperf.vocabulary import Exclusion

log = logging.getLogger(__name__)

#: Exclusions that are faults (``train.on_fault`` applies to them).
FAULT_EXCLUSIONS = (Exclusion.fault, Exclusion.no_samples)


def _learner_counts(algo: Any, learners: int) -> tuple[int, int]:
    """(healthy remote learners, their restarts so far); ``(learners, 0)`` with no manager.

    A local learner (``num_learners=0``) has no actor manager: its failure is an
    exception in the driver, which fails the run.
    """
    manager = getattr(getattr(algo, "learner_group", None), "_worker_manager", None)
    if manager is None:
        return learners, 0
    return int(manager.num_healthy_actors()), int(manager.total_num_restarts())


def ray_worker_table() -> list[bytes]:
    """Ray's GCS worker table, one serialized ``WorkerTableData`` per worker (Ray 2.60, a
    private accessor); empty where it fails (not connected, or the API moved)."""
    import ray

    try:
        return list(ray._private.state.state._connect_and_get_accessor().get_worker_table())
    except Exception:  # the fault is counted all the same, only not named
        return []


def oom_kills(seen: set[str], table: Iterable[bytes]) -> list[str]:
    """What Ray's memory monitor said of each worker of ``table`` (:func:`ray_worker_table`)
    it killed that is not in ``seen`` (added): the exit cause ``NODE_OUT_OF_MEMORY``. A
    restarted actor's own record forgets its death; the worker's does not."""
    from ray.core.generated import common_pb2, gcs_pb2

    out_of_memory = common_pb2.NODE_OUT_OF_MEMORY  # type: ignore[attr-defined]
    found = []
    for raw in table:
        worker = gcs_pb2.WorkerTableData.FromString(raw)  # type: ignore[attr-defined]
        key = worker.worker_address.worker_id.hex()
        if worker.exit_type != out_of_memory or key in seen:
            continue
        seen.add(key)
        found.append(_memory_figures(worker.exit_detail))
    return found


def _memory_figures(detail: str) -> str:
    """``the node's memory was 5.9GB used / 23.5GB limit, over its threshold of 25.0% (...)``
    from Ray's text (its first line where the figures are not found)."""
    used = re.search(r"was ([\d.]+GB used / [\d.]+GB limit)", detail)
    threshold = re.search(r"exceeded threshold of \d+B \(([\d.]+%) of", detail)
    if used is None or threshold is None:
        return detail.split("\n", 1)[0]
    return (
        f"the node's memory was {used.group(1)}, over its threshold of {threshold.group(1)} "
        f"(RAY_memory_usage_threshold)"
    )


class FaultWatch:
    """Per-iteration health of the env runners and learners from RLlib's lifetime counters,
    and which of their deaths were Ray's memory monitor's (out of memory)."""

    def __init__(
        self,
        algo: Any,
        plan: ResourcePlan,
        worker_table: Callable[[], Iterable[bytes]] = ray_worker_table,
    ) -> None:
        self.algo = algo
        self.worker_table = worker_table
        self.env_runners = int(plan.num_env_runners)
        self.learners = int(plan.num_learners)
        self.restarts = 0
        self.learner_restarts = _learner_counts(algo, self.learners)[1]
        self.learners_healthy = self.learners
        self.oom_seen: set[str] = set()
        self.oom_said = False
        # A sweep's Ray: the kills of earlier cells are not this run's.
        oom_kills(self.oom_seen, worker_table())

    def read(self, result: dict[str, Any]) -> dict[str, int]:
        """The :data:`~rlperf.results.columns.FAULT_COLUMNS` of the iteration ``result`` ended."""
        tolerance = result.get("fault_tolerance") or {}
        healthy = int(tolerance.get("num_healthy_workers", self.env_runners))
        restarts = int(tolerance.get("num_remote_worker_restarts", self.restarts))
        learners_healthy, learner_restarts = _learner_counts(self.algo, self.learners)
        self.learners_healthy = learners_healthy
        row = {
            ENV_RUNNERS_HEALTHY: healthy,
            ENV_RUNNER_RESTARTS: restarts - self.restarts,
            ENV_RUNNERS_LOST: max(self.env_runners - healthy, 0),
            LEARNER_FAILURES: max(self.learners - learners_healthy, 0)
            + (learner_restarts - self.learner_restarts),
            OOM_KILLS: 0,
        }
        self.restarts, self.learner_restarts = restarts, learner_restarts
        if _touched(row):
            killed = oom_kills(self.oom_seen, self.worker_table())
            row[OOM_KILLS] = len(killed)
            if killed and not self.oom_said:  # once a run; the fault lines count them
                self.oom_said = True
                log.warning("Ray's memory monitor killed a worker: %s", killed[0])
        return row


def _touched(row: dict[str, Any]) -> bool:
    """A fault touched the iteration: an env runner lost or restarted, a learner failed."""
    return bool(row[ENV_RUNNER_RESTARTS] or row[ENV_RUNNERS_LOST] or row[LEARNER_FAILURES])


def exclusion(row: dict[str, Any], warmup: bool) -> str:
    """The iteration's ``excluded`` value: a fault first, then no samples, then warm-up."""
    if _touched(row):
        return Exclusion.fault
    if row[ENV_STEPS] == 0:
        return Exclusion.no_samples
    return Exclusion.warmup if warmup else ""


def describe(row: dict[str, Any]) -> str:
    """``1 env runner(s) lost, 0 restarted, ...`` for the fault of ``row``."""
    if row[EXCLUDED_COLUMN] == Exclusion.no_samples:
        return "no env steps sampled"
    parts = [
        f"{row[ENV_RUNNERS_LOST]} env runner(s) lost",
        f"{row[ENV_RUNNER_RESTARTS]} restarted",
        f"{row[ENV_RUNNERS_HEALTHY]} healthy at its end",
    ]
    if row[LEARNER_FAILURES]:
        parts.append(f"{row[LEARNER_FAILURES]} learner failure(s)")
    if row.get(OOM_KILLS):
        parts.append(f"{row[OOM_KILLS]} killed by Ray's memory monitor (out of memory)")
    return ", ".join(parts)


def handle(row: dict[str, Any], on_fault: str) -> None:
    """Say so when ``row`` is a fault iteration; raise :class:`RunFault` if ``on_fault=fail``."""
    if row[EXCLUDED_COLUMN] not in FAULT_EXCLUSIONS:
        return
    what = f"iteration {row[ITERATION]}: {describe(row)}"
    if on_fault == "fail":
        raise RunFault(f"{what} (train.on_fault=fail)")
    log.warning("%s: excluded from the figures (train.on_fault=continue)", what)


def check_trainable(watch: FaultWatch, row: dict[str, Any]) -> None:
    """Raise :class:`RunFault` when every remote learner actor is lost: RLlib 2.60 does not
    restart learners, and an APPO/IMPALA run without one goes on sampling nothing and
    training nothing (and cannot save its checkpoint), whatever ``train.on_fault`` says."""
    if watch.learners and watch.learners_healthy == 0:
        raise learner_lost(row[ITERATION], row[ITERATION] - 1)


def learner_lost(iteration: int, kept: int, cause: BaseException | None = None) -> RunFault:
    """The fault that ends a run whose learner actor died (in an iteration, or at its end)."""
    why = f" ({type(cause).__name__})" if cause is not None else ""
    return RunFault(
        f"iteration {iteration}: a learner actor died{why} and RLlib does not restart "
        f"learners, so the run cannot train on; the {kept} iteration(s) before are kept in "
        f"metrics.csv"
    )


def fault_list(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``summary.json["faults"]``: every fault iteration with its health columns."""
    return [
        {
            ITERATION: r[ITERATION],
            "reason": r[EXCLUDED_COLUMN],
            "what": describe(r),
            **{k: r[k] for k in FAULT_COLUMNS},
        }
        for r in rows
        if r[EXCLUDED_COLUMN] in FAULT_EXCLUSIONS
    ]
