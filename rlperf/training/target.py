"""Time-to-target: ``train.stop`` criteria, the evaluation that judges a return target,
and what ``summary.json`` records about them.

Config subtrees used: ``train.stop`` (``episode_return``, ``env_steps``, ``time_s``,
``judge``), ``train.evaluation`` (``interval``, ``episodes``, ``explore``, ``max_episode_steps``),
``train.iterations`` (the cap).

The clock starts when the algorithm is built (Ray start, pre-flight and the env
ceiling probe are before it and reported apart). ``train_time_s`` is wall-clock
time since then less the time spent in RLlib's evaluation (``eval_s``, reported
apart): evaluation measures the policy, it is not part of training, and leaving it
out keeps ``judge=eval`` and ``judge=train`` comparable. The first criterion
reached ends the run after the iteration that reached it.

No evaluation runs unbounded: each evaluation episode ends at the env's own time
limit, else at ``train.evaluation.max_episode_steps`` (default 10 000 agent steps,
:func:`evaluation_cap`), where :class:`~rlperf.envs.factory.EvaluationCap` truncates
it. A round with a capped episode (``eval_capped_episodes`` > 0) does not count toward
the target: its mean return includes the capped episode's partial one.
"""

from __future__ import annotations

import math
import time
from typing import Any

from omegaconf import DictConfig

from rlperf.envs.check import DEFAULT_EVALUATION_CAP
from rlperf.envs.factory import CAPPED_INFO, EVALUATION_CAP, time_limit
from rlperf.layout import EXCLUDED_COLUMN
from rlperf.results.columns import (
    ENV_STEPS,
    EPISODE_RETURN_MEAN,
    EVAL_CAPPED_EPISODES,
    EVAL_EPISODES,
    EVAL_RETURN_MEAN,
    EVAL_S,
    ITER_S,
    ITERATION,
    S_PER_1K_ENV_STEPS,
    TRAIN_TIME_S,
    WALL_S,
)
from rlperf.results.record import TrainRecord
from rlperf.stats.stopping import PER_1K, WithinRun

#: The key RLlib's evaluation results count capped episodes under (:func:`count_capped`).
CAPPED_METRIC = "rlperf_capped_episodes"

#: Criteria of ``train.stop`` in the order they are checked (``iterations`` is the cap).
STOP_KEYS = ("episode_return", "env_steps", "time_s", "precision")


def evaluates(cfg: DictConfig) -> bool:
    """Whether the run evaluates: a return target judged on evaluation episodes."""
    stop = cfg.train.stop
    return stop.episode_return is not None and str(stop.judge) == "eval"


def evaluation_cap(cfg: DictConfig) -> tuple[int, str]:
    """Agent steps after which an evaluation episode ends, and where the number comes from:
    ``train.evaluation.max_episode_steps`` when set, else the env's own time limit
    (``env``: :func:`~rlperf.envs.factory.time_limit`), else 10 000 (``default``). Only
    the env's own limit ends episodes that count: the others are rlperf's cap."""
    given = cfg.train.evaluation.max_episode_steps
    if given is not None:
        return int(given), "train.evaluation.max_episode_steps"
    own = time_limit(dict(cfg.env))
    if own is not None:
        return own, "env"
    return DEFAULT_EVALUATION_CAP, "default"


def count_capped(*, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
    """RLlib ``on_episode_end`` callback: count the episodes rlperf's cap truncated."""
    if metrics_logger is None:
        return
    info = episode.get_infos(-1)
    capped = isinstance(info, dict) and bool(info.get(CAPPED_INFO))
    metrics_logger.log_value(CAPPED_METRIC, int(capped), reduce="sum")


def evaluation_settings(cfg: DictConfig) -> dict[str, Any]:
    """``summary.json["evaluation"]``: whether and how RLlib evaluated."""
    e = cfg.train.evaluation
    if not evaluates(cfg):
        return {"enabled": False}
    cap, source = evaluation_cap(cfg)
    return {
        "enabled": True,
        "interval": int(e.interval),
        "episodes": int(e.episodes),
        "explore": bool(e.explore),
        "max_episode_steps": cap,
        "max_episode_steps_from": source,
        # Evaluation runs in the driver, on a local env runner of RLlib's evaluation
        # group, after the training step (not in parallel): it asks Ray for no CPU.
        "env_runners": 0,
        "parallel_to_training": False,
    }


def with_evaluation(algo_config: Any, cfg: DictConfig) -> Any:
    """``algo_config`` (any RLlib ``AlgorithmConfig``) with RLlib's evaluation set up when
    the run judges a return target on evaluation episodes; unchanged otherwise."""
    if not evaluates(cfg):
        return algo_config
    e = cfg.train.evaluation
    overrides: dict[str, Any] = {"explore": bool(e.explore)}
    cap, source = evaluation_cap(cfg)
    if source != "env":
        overrides["env_config"] = {**dict(algo_config.env_config), EVALUATION_CAP: cap}
    return algo_config.callbacks(on_episode_end=count_capped).evaluation(
        evaluation_interval=int(e.interval),
        evaluation_duration=int(e.episodes),
        evaluation_duration_unit="episodes",
        evaluation_num_env_runners=0,
        evaluation_parallel_to_training=False,
        evaluation_config=overrides,
    )


def evaluation_row(result: dict[str, Any], evaluated: bool = True) -> dict[str, float]:
    """``eval_return_mean``, ``eval_episodes`` and ``eval_capped_episodes`` of one
    ``train()`` result (NaN / 0 / 0 in iterations without evaluation).

    ``evaluated``: whether ``Algorithm.evaluate`` ran in this iteration. With
    ``train.evaluation.interval > 1`` RLlib 2.60 keeps the last evaluation's results in
    the iterations between (their episode count stale, or NaN): not this row's.
    """
    # RLlib: deferred, the job wrapper validates the config before Ray loads.
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        EPISODE_RETURN_MEAN,
        EVALUATION_RESULTS,
        NUM_EPISODES,
    )

    runners = (result.get(EVALUATION_RESULTS) or {}).get(ENV_RUNNER_RESULTS) or {}
    episodes = runners.get(NUM_EPISODES)
    if not evaluated or episodes is None or not math.isfinite(float(episodes)) or episodes <= 0:
        return {EVAL_RETURN_MEAN: math.nan, EVAL_EPISODES: 0, EVAL_CAPPED_EPISODES: 0}
    ret = runners.get(EPISODE_RETURN_MEAN)
    return {
        EVAL_RETURN_MEAN: float(ret) if ret is not None else math.nan,
        EVAL_EPISODES: int(episodes),
        EVAL_CAPPED_EPISODES: int(runners.get(CAPPED_METRIC) or 0),
    }


class StopCheck:
    """Tracks the run against ``train.stop`` from the moment the algorithm is built.

    ``observe(row)`` adds ``train_time_s`` to an iteration's row and returns the
    criterion that ends the run after it (``None``: go on); ``record()`` writes its
    ``summary.json`` part.
    """

    def __init__(self, cfg: DictConfig) -> None:
        self.stop = cfg.train.stop
        self.judge = str(self.stop.judge)
        self.cap = int(cfg.train.iterations)
        self.settings = evaluation_settings(cfg)
        self.built_at = time.perf_counter()
        self.eval_s = 0.0
        self.capped = 0  # evaluation episodes rlperf's cap ended
        self.env_steps = 0
        self.stopped_by = "iterations"
        self.reached_row: dict[str, Any] | None = None
        counted = self.cap - int(cfg.train.warmup_iterations)
        precision = self.stop.get("precision")
        self.precision = None if precision is None else WithinRun(float(precision), counted)

    def observe(self, row: dict[str, Any]) -> str | None:
        self.eval_s += float(row.get(EVAL_S) or 0.0)
        self.capped += int(row.get(EVAL_CAPPED_EPISODES) or 0)
        self.env_steps += int(row[ENV_STEPS])
        wall = time.perf_counter() - self.built_at
        row[TRAIN_TIME_S] = wall - self.eval_s
        hit = self._criterion(row)
        if self.precision is not None and not row[EXCLUDED_COLUMN] and row[ENV_STEPS] > 0:
            value = PER_1K * float(row[ITER_S]) / float(row[ENV_STEPS])
            if self.precision.add(value, int(row[ITERATION])) and hit is None:
                hit = "precision"
        if hit == "episode_return":
            self.reached_row = {
                ITERATION: row[ITERATION],
                TRAIN_TIME_S: row[TRAIN_TIME_S],
                WALL_S: wall,
                ENV_STEPS: self.env_steps,
                "return": self._judged_return(row),
            }
        if hit is not None:
            self.stopped_by = hit
        return hit

    def budget_fraction(self, iteration: int, train_time_s: float) -> float:
        """How far the run is towards its nearest end that can be foreseen: the
        ``train.iterations`` cap or the ``env_steps`` / ``time_s`` budgets (a return
        target cannot be foreseen), as a fraction in [0, 1] (the progress line's ETA)."""
        parts = [iteration / self.cap if self.cap > 0 else 0.0]
        if self.stop.env_steps:
            parts.append(self.env_steps / int(self.stop.env_steps))
        if self.stop.time_s:
            parts.append(train_time_s / float(self.stop.time_s))
        return min(max(parts), 1.0)

    def _judged_return(self, row: dict[str, Any]) -> float:
        if self.judge == "eval" and row.get(EVAL_CAPPED_EPISODES):
            return math.nan  # a capped episode never counts toward the target
        key = EVAL_RETURN_MEAN if self.judge == "eval" else EPISODE_RETURN_MEAN
        value = row.get(key)
        return float(value) if value is not None else math.nan

    def _criterion(self, row: dict[str, Any]) -> str | None:
        """The budget or target ``row`` reached (the precision target is checked apart)."""
        target = self.stop.episode_return
        if target is not None and self._judged_return(row) >= float(target):
            return "episode_return"
        if self.stop.env_steps is not None and self.env_steps >= int(self.stop.env_steps):
            return "env_steps"
        if self.stop.time_s is not None and row[TRAIN_TIME_S] >= float(self.stop.time_s):
            return "time_s"
        return None

    def record(self, record: TrainRecord) -> TrainRecord:
        """Into ``record``: ``stop`` (the criteria and which one ended the run), ``reached``
        (null without a return target), ``time_to_target_s``, ``env_steps_to_target``,
        ``iterations_to_target``, ``wall_s_to_target`` (null unless reached),
        ``evaluation`` (settings and total ``eval_s``), and ``precision`` where one was set."""
        has_target = self.stop.episode_return is not None
        hit = self.reached_row or {}
        record.stop = {
            **{k: self.stop[k] for k in STOP_KEYS},
            "judge": self.judge if has_target else None,
            "iterations": self.cap,
            "stopped_by": self.stopped_by,
        }
        record.reached = (self.reached_row is not None) if has_target else None
        record.time_to_target_s = hit.get(TRAIN_TIME_S)
        record.env_steps_to_target = hit.get(ENV_STEPS)
        record.iterations_to_target = hit.get(ITERATION)
        record.wall_s_to_target = hit.get(WALL_S)
        record.return_at_target = hit.get("return")
        record.evaluation = {**self.settings, EVAL_S: self.eval_s, "capped_episodes": self.capped}
        if self.precision is not None:
            record.precision = self._precision()
        return record

    def _precision(self) -> dict[str, Any]:
        """``summary.json`` ``precision``: the target, whether and at which iteration it was
        reached, and the last look's interval of the time per 1 000 env steps."""
        assert self.precision is not None
        return self.precision.summary(S_PER_1K_ENV_STEPS, "at_iteration")
