"""What each algorithm's iteration measures truly: its timing columns of ``metrics.csv``.

One :class:`Timing` per algorithm family (each algorithm's spec names its ``timing``),
built on the started Algorithm; :meth:`Timing.columns` gives one iteration's timing columns
(docs/results.md#timing-per-algorithm says which each fills, and why the others stay
empty — NaN, written as an empty cell, never 0):

- :class:`SequentialTiming` (PPO): ``training_step`` is sample → learn → sync, so
  the phase columns add up (:mod:`rlperf.algos.timed_learner`).
- :class:`AsyncTiming` (APPO, IMPALA): sampling and learning overlap and the driver
  only enqueues, so no phase columns; throughput, learner update calls, and what
  RLlib's result dict reports of the learner queue and of the policy lag.
- :class:`ReplayTiming` (DQN, SAC, TQC): ``training_step`` is sample → store → replay →
  learn → sync in the driver, so the phases add up, with ``replay_s`` and the
  replay ratio.
"""

from __future__ import annotations

import math
from typing import Any

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY, LEARNER_RESULTS

from rlperf.algos import SPECS
from rlperf.algos.timed_learner import PhaseClock, iteration_phases
from rlperf.results.columns import (
    ENV_STEPS,
    LEARN_S,
    LEARNER_QUEUE_SIZE,
    LEARNER_UPDATES,
    LOAD_S,
    OTHER_S,
    PHASES,
    POLICY_LAG,
    REPLAY_RATIO,
    REPLAY_S,
    SAMPLE_S,
    SYNC_S,
    TRAINED_STEPS,
    TRAINED_STEPS_PER_S,
)

NAN = math.nan


def _nested(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else NAN


def _per_s(steps: float, seconds: float) -> float:
    return steps / seconds if seconds > 0 else NAN


class Timing:
    """Wraps the Algorithm's methods that show its phases, once, when built."""

    def __init__(self, algo: Any) -> None:
        self.algo = algo
        self.clock = PhaseClock()
        algo.training_step = self.clock.wrap("training_step", algo.training_step)
        algo.learner_group.update = self.clock.wrap("learner_update", algo.learner_group.update)

    def columns(self, result: dict[str, Any], counts: dict[str, int], iter_s: float) -> dict:
        """This iteration's timing columns from the clock, RLlib's ``result`` and the
        iteration's step ``counts`` (``env_steps``, ``trained_steps``)."""
        raise NotImplementedError


class SequentialTiming(Timing):
    """PPO: exact sequential phases (driver clock + :class:`TimedPPOTorchLearner`)."""

    def __init__(self, algo: Any) -> None:
        super().__init__(algo)
        algo.env_runner_group.sync_weights = self.clock.wrap(
            "sync", algo.env_runner_group.sync_weights
        )

    def columns(self, result: dict[str, Any], counts: dict[str, int], iter_s: float) -> dict:
        calls = self.clock.pop_calls()
        phases = iteration_phases(self.algo, self.clock)
        return {
            **phases,
            OTHER_S: iter_s - sum(phases.values()),
            TRAINED_STEPS_PER_S: _per_s(counts[TRAINED_STEPS], phases[LEARN_S]),
            LEARNER_UPDATES: calls["learner_update"],
        }


class AsyncTiming(Timing):
    """APPO/IMPALA: no sequential phases (the driver only enqueues); throughput over the
    iteration, ``LearnerGroup.update`` calls (one train batch each), the learner's
    in-queue at the iteration's end, and RLlib's policy lag: gradient updates
    between the weights that sampled a trained batch (the sequence number RLlib stamps
    on episodes) and the learner's, mean over the batches RLlib reported."""

    def columns(self, result: dict[str, Any], counts: dict[str, int], iter_s: float) -> dict:
        calls = self.clock.pop_calls()
        self.clock.pop()
        lag = _nested(
            result, LEARNER_RESULTS, DEFAULT_MODULE_ID, DIFF_NUM_GRAD_UPDATES_VS_SAMPLER_POLICY
        )
        return {
            **dict.fromkeys((*PHASES, OTHER_S), NAN),  # overlapping: not phases of iter_s
            TRAINED_STEPS_PER_S: _per_s(counts[TRAINED_STEPS], iter_s),
            LEARNER_UPDATES: calls["learner_update"],
            LEARNER_QUEUE_SIZE: self._learner_queue(),
            POLICY_LAG: _number(lag),
        }

    def _learner_queue(self) -> float:
        """Batches waiting for the learner thread now, mean over learners (IMPALA: its
        in-queue; APPO: valid entries of its circular buffer); NaN without such a queue."""

        def size(learner: Any) -> int | None:
            q = getattr(learner, "_learner_thread_in_queue", None)
            return q.qsize() if q is not None and hasattr(q, "qsize") else None

        sizes = [r.get() for r in self.algo.learner_group.foreach_learner(size)]
        # A learner actor that died answers with its error (ActorDiedError), not a size:
        # the fault columns record it (rlperf.training.faults).
        known = [s for s in sizes if isinstance(s, int)]
        return sum(known) / len(known) if known else NAN


class ReplayTiming(Timing):
    """DQN/SAC: sample (``sample_s``: sampling and episode bookkeeping), replay buffer
    (``replay_s``: add, sample, priority updates), learner update (``learn_s``, the
    batch's assembly included), weight sync (``sync_s``), all in the driver."""

    def __init__(self, algo: Any) -> None:
        super().__init__(algo)
        algo.env_runner_group.sync_weights = self.clock.wrap(
            "sync", algo.env_runner_group.sync_weights
        )
        buffer = algo.local_replay_buffer
        for method in ("add", "sample", "update_priorities"):
            if hasattr(buffer, method):
                setattr(
                    buffer, method, self.clock.wrap(f"replay_{method}", getattr(buffer, method))
                )

    def columns(self, result: dict[str, Any], counts: dict[str, int], iter_s: float) -> dict:
        calls = self.clock.pop_calls()
        t = self.clock.pop()
        replay = sum(v for k, v in t.items() if k.startswith("replay_"))
        learn, sync = t["learner_update"], t["sync"]
        phases = {
            SAMPLE_S: max(t["training_step"] - learn - sync - replay, 0.0),
            LOAD_S: NAN,  # inside learn_s: RLlib's learner assembles the batch in update()
            LEARN_S: learn,
            SYNC_S: sync,
        }
        return {
            **phases,
            REPLAY_S: replay,
            OTHER_S: iter_s - t["training_step"],
            TRAINED_STEPS_PER_S: _per_s(counts[TRAINED_STEPS], learn),
            LEARNER_UPDATES: calls["learner_update"],
            REPLAY_RATIO: _per_s(counts[TRAINED_STEPS], counts[ENV_STEPS]),
        }


def instrument_timing(algo: Any, name: str) -> Timing:
    """The :class:`Timing` of ``algo.name`` ``name`` (its spec's ``timing``) on the built
    ``algo``."""
    timing = SPECS[name].timing_class()(algo)
    assert isinstance(timing, Timing)
    return timing
