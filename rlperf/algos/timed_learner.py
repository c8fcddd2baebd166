"""Exact per-iteration phase times (the learner class PPO is built with, and the driver clock).

RLlib 2.60 reports its timers as EMAs (coefficient 0.01), not per-iteration
values, so rlperf times the phases itself:

- on the learner, :class:`TimedPPOTorchLearner` times the learner connector
  (``_make_batch_if_necessary``: batch assembly, GAE with its value forward
  pass) as ``load_s`` and the rest of ``update`` (the SGD epochs) as ``learn_s``;
- on the driver, :class:`PhaseClock` wraps ``training_step``,
  ``learner_group.update`` and ``env_runner_group.sync_weights`` of one
  Algorithm instance (:class:`rlperf.algos.timing.SequentialTiming`);
  ``sample_s`` is ``training_step`` minus the update and the weight sync (PPO's
  training_step is sample → update → sync).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from rlperf.results.columns import LEARN_S, LOAD_S, SAMPLE_S, SYNC_S


class TimedPPOTorchLearner(PPOTorchLearner):
    """PPO torch learner that accumulates ``load_s`` and ``update_s`` until popped."""

    def build(self, **kwargs: Any) -> None:
        super().build(**kwargs)
        self._rlperf_times = {LOAD_S: 0.0, "update_s": 0.0}

    def _make_batch_if_necessary(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return super()._make_batch_if_necessary(*args, **kwargs)
        finally:
            self._rlperf_times[LOAD_S] += time.perf_counter() - t0

    def update(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return super().update(*args, **kwargs)
        finally:
            self._rlperf_times["update_s"] += time.perf_counter() - t0

    def rlperf_pop_times(self) -> dict[str, float]:
        """Times accumulated since the last pop (one training iteration)."""
        times, self._rlperf_times = self._rlperf_times, {LOAD_S: 0.0, "update_s": 0.0}
        return times


class PhaseClock:
    """Accumulates wall time and calls of wrapped bound methods per phase name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.totals.setdefault(name, 0.0)
        self.calls.setdefault(name, 0)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[name] += time.perf_counter() - t0
                self.calls[name] += 1

        return timed

    def pop(self) -> dict[str, float]:
        out = dict(self.totals)
        self.totals = dict.fromkeys(self.totals, 0.0)
        return out

    def pop_calls(self) -> dict[str, int]:
        out = dict(self.calls)
        self.calls = dict.fromkeys(self.calls, 0)
        return out


def iteration_phases(algo: Any, clock: PhaseClock) -> dict[str, float]:
    """Pop this iteration's driver and learner times into the canonical phase columns."""
    driver = clock.pop()
    results = algo.learner_group.foreach_learner(lambda lrn: lrn.rlperf_pop_times())
    learner_times = [r.get() for r in results]  # CallResult per learner
    # Data-parallel learners run concurrently: the slowest one sets the pace.
    load = max(t[LOAD_S] for t in learner_times)
    update = max(t["update_s"] for t in learner_times)
    update_driver = driver["learner_update"]
    sync = driver["sync"]
    return {
        SAMPLE_S: max(driver["training_step"] - update_driver - sync, 0.0),
        LOAD_S: load,
        LEARN_S: max(update - load, 0.0),
        SYNC_S: sync,
    }
