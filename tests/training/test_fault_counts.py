"""The fault watch's arithmetic (rlperf.training.faults) without Ray: remote learners'
health from their actor manager's counters, the run that cannot train on, what the log
and the summary say (found by mutation testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from rlperf.errors import RunFault
from rlperf.layout import EXCLUDED_COLUMN
from rlperf.resources.plan import ResourcePlan
from rlperf.training import faults
from rlperf.vocabulary import Exclusion


@dataclass
class ActorManager:
    """Stands in for RLlib's ``FaultTolerantActorManager``: the two counters the watch reads."""

    healthy: int
    restarts: int

    def num_healthy_actors(self) -> int:
        return self.healthy

    def total_num_restarts(self) -> int:
        return self.restarts


def _plan(env_runners: int, learners: int) -> ResourcePlan:
    return ResourcePlan((), 0.0, 0.0, 0.0, learners, 0.0, env_runners, 1.0, 1, None, None)


def _algo(manager: ActorManager | None) -> Any:
    return SimpleNamespace(learner_group=SimpleNamespace(_worker_manager=manager))


def test_remote_learners_failures_are_lost_learners_plus_new_restarts() -> None:
    manager = ActorManager(healthy=2, restarts=1)  # one restart before the run's first read
    watch = faults.FaultWatch(_algo(manager), _plan(env_runners=2, learners=2))
    assert (watch.learner_restarts, watch.learners_healthy) == (1, 2)
    row = watch.read({})  # no fault_tolerance entry: every env runner healthy, no restart
    assert (row["env_runners_healthy"], row["env_runners_lost"]) == (2, 0)
    assert (row["env_runner_restarts"], row["learner_failures"]) == (0, 0)
    manager.healthy = 1
    assert watch.read({})["learner_failures"] == 1
    assert watch.learners_healthy == 1
    manager.healthy, manager.restarts = 2, 3  # two restarts since the last read
    assert watch.read({})["learner_failures"] == 2
    assert (watch.learner_restarts, watch.learners_healthy) == (3, 2)
    assert watch.read({})["learner_failures"] == 0


def test_env_runner_counters_are_differences_of_lifetime_counts() -> None:
    watch = faults.FaultWatch(_algo(None), _plan(env_runners=3, learners=0))
    ft = "fault_tolerance"
    row = watch.read({ft: {"num_healthy_workers": 1, "num_remote_worker_restarts": 2}})
    assert (row["env_runners_lost"], row["env_runner_restarts"]) == (2, 2)
    row = watch.read({ft: {"num_healthy_workers": 3}})  # restarts not reported: none new
    assert (row["env_runners_lost"], row["env_runner_restarts"]) == (0, 0)
    row = watch.read({ft: {"num_healthy_workers": 4, "num_remote_worker_restarts": 5}})
    assert (row["env_runners_lost"], row["env_runner_restarts"], row["learner_failures"]) == (
        0,
        3,
        0,
    )


def test_a_local_learner_has_no_counters() -> None:
    # No learner group (the learner in the driver): its failure fails the run instead.
    for algo in (object(), _algo(None)):
        watch = faults.FaultWatch(algo, _plan(env_runners=1, learners=0))
        assert (watch.learner_restarts, watch.learners_healthy) == (0, 0)
        assert watch.read({})["learner_failures"] == 0
    remote = faults.FaultWatch(object(), _plan(env_runners=1, learners=2))
    assert (remote.learner_restarts, remote.learners_healthy) == (0, 2)
    assert remote.read({})["learner_failures"] == 0


def test_a_run_whose_learners_are_all_lost_cannot_train_on() -> None:
    manager = ActorManager(healthy=2, restarts=0)
    watch = faults.FaultWatch(_algo(manager), _plan(env_runners=1, learners=2))
    manager.healthy = 1
    watch.read({})
    faults.check_trainable(watch, {"iteration": 4})  # one left: it trains on
    manager.healthy = 0
    watch.read({})
    with pytest.raises(RunFault) as err:
        faults.check_trainable(watch, {"iteration": 5})
    assert str(err.value) == (
        "iteration 5: a learner actor died and RLlib does not restart learners, so the run "
        "cannot train on; the 4 iteration(s) before are kept in metrics.csv"
    )
    local = faults.FaultWatch(object(), _plan(env_runners=1, learners=0))
    faults.check_trainable(local, {"iteration": 1})
    assert "a learner actor died (ValueError) and" in str(
        faults.learner_lost(3, 2, ValueError("gone"))
    )


def _row(**over: Any) -> dict[str, Any]:
    row = {"iteration": 2, "env_steps": 100, "env_runners_healthy": 1, "env_runners_lost": 1,
           "env_runner_restarts": 0, "learner_failures": 0}  # fmt: skip
    row |= over
    row[EXCLUDED_COLUMN] = faults.exclusion(row, warmup=False)
    return row


def test_what_a_fault_is_called() -> None:
    assert faults.describe(_row(env_steps=0, env_runners_lost=0)) == "no env steps sampled"
    assert faults.describe(_row(learner_failures=2)) == (
        "1 env runner(s) lost, 0 restarted, 1 healthy at its end, 2 learner failure(s)"
    )
    assert faults.exclusion(_row(env_runners_lost=0, learner_failures=1), False) == Exclusion.fault
    assert faults.exclusion(_row(env_runners_lost=0), warmup=True) == Exclusion.warmup


def test_a_fault_iteration_is_logged_when_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=faults.__name__):
        faults.handle(_row(), "continue")
        faults.handle(_row(env_runners_lost=0), "continue")  # not a fault: nothing said
    assert caplog.messages == [
        "iteration 2: 1 env runner(s) lost, 0 restarted, 1 healthy at its end: excluded from "
        "the figures (train.on_fault=continue)"
    ]


def test_an_out_of_memory_kill_is_named_with_rays_memory_figures() -> None:
    detail = (
        "Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 10.0.0.2, ID: ab12) where the task was running was "
        "5.9GB used / 23.5GB limit, which exceeded threshold of 5875000000B (25.0% of the "
        "node's memory). Ray killed this worker."
    )
    assert faults._memory_figures(detail) == (
        "the node's memory was 5.9GB used / 23.5GB limit, over its threshold of 25.0% "
        "(RAY_memory_usage_threshold)"
    )
    # Figures not found (another Ray's wording): its first line.
    assert faults._memory_figures("Worker killed: out of memory\nmore\nand more") == (
        "Worker killed: out of memory"
    )
    assert faults._memory_figures("was 1.0GB used / 2.0GB limit\nno threshold") == (
        "was 1.0GB used / 2.0GB limit"
    )
    assert faults.describe(_row(oom_kills=2)) == (
        "1 env runner(s) lost, 0 restarted, 1 healthy at its end, 2 killed by Ray's memory "
        "monitor (out of memory)"
    )


def test_an_iteration_without_a_fault_has_no_oom_kills() -> None:
    watch = faults.FaultWatch(object(), _plan(env_runners=1, learners=0))
    assert watch.read({})["oom_kills"] == 0


# ------------------------------------------- out-of-memory kills from Ray's worker table

#: Ray 2.60's exit detail of a worker its memory monitor killed (the part the line reads).
OOM_DETAIL = (
    "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: "
    "127.0.0.1, ID: 3f50) was 5.9GB used / 23.5GB limit (0.25)\nOOM kill reason: Memory "
    "usage 6300000000B exceeded threshold of 6290000000B (25.0% of 25200000000B limit)"
)


def _result(healthy: int, restarts: int) -> dict[str, Any]:
    """The part of RLlib's ``Algorithm.train()`` result the watch reads (Ray 2.60 keys)."""
    return {
        "fault_tolerance": {"num_healthy_workers": healthy, "num_remote_worker_restarts": restarts}
    }


def _worker(worker_id: bytes, exit_type: str | None, detail: str = "") -> bytes:
    """One record of Ray's GCS worker table, as its accessor returns it (serialized)."""
    from ray.core.generated import common_pb2, gcs_pb2

    record = gcs_pb2.WorkerTableData(exit_detail=detail)
    record.worker_address.worker_id = worker_id
    if exit_type is not None:
        record.exit_type = common_pb2.WorkerExitType.Value(exit_type)
    return record.SerializeToString()


class WorkerTable:
    """Stands in for Ray's GCS worker table: the records so far, and how often it was read."""

    def __init__(self, *records: bytes) -> None:
        self.records = list(records)
        self.reads = 0

    def __call__(self) -> list[bytes]:
        self.reads += 1
        return list(self.records)


def test_the_memory_monitors_kills_are_counted_once_each_and_said_once(caplog) -> None:
    earlier = _worker(b"\x01" * 28, "NODE_OUT_OF_MEMORY", OOM_DETAIL)  # a sweep's earlier cell
    table = WorkerTable(earlier, _worker(b"\x02" * 28, None))
    watch = faults.FaultWatch(object(), _plan(env_runners=1, learners=0), worker_table=table)
    assert table.reads == 1
    assert watch.read(_result(healthy=1, restarts=0))["oom_kills"] == 0
    assert table.reads == 1  # a healthy iteration does not read the table
    table.records += [
        _worker(b"\x03" * 28, "NODE_OUT_OF_MEMORY", OOM_DETAIL),
        _worker(b"\x04" * 28, "SYSTEM_ERROR", "killed by a signal"),  # lost, but not OOM
        _worker(b"\x05" * 28, "NODE_OUT_OF_MEMORY", "the second kill's own words"),
    ]
    with caplog.at_level(logging.WARNING, logger=faults.__name__):
        lost = watch.read(_result(healthy=0, restarts=0))
        again = watch.read(_result(healthy=1, restarts=1))
    assert (lost["oom_kills"], again["oom_kills"]) == (2, 0)  # each worker counted once
    said = [r.getMessage() for r in caplog.records if "memory monitor" in r.getMessage()]
    assert said == [
        "Ray's memory monitor killed a worker: the node's memory was 5.9GB used / 23.5GB "
        "limit, over its threshold of 25.0% (RAY_memory_usage_threshold)"
    ]
    table.records.append(_worker(b"\x06" * 28, "NODE_OUT_OF_MEMORY", OOM_DETAIL))
    with caplog.at_level(logging.WARNING, logger=faults.__name__):
        caplog.clear()
        assert watch.read(_result(healthy=0, restarts=1))["oom_kills"] == 1
    assert not [r for r in caplog.records if "memory monitor" in r.getMessage()]  # said once


def test_the_oom_kills_of_a_table_not_seen_before() -> None:
    seen: set[str] = set()
    records = [
        _worker(b"\x07" * 28, "NODE_OUT_OF_MEMORY", "killed\nmore"),
        _worker(b"\x08" * 28, "INTENDED_USER_EXIT"),
    ]
    assert faults.oom_kills(seen, records) == ["killed"]
    assert seen == {(b"\x07" * 28).hex()}
    assert faults.oom_kills(seen, records) == []
