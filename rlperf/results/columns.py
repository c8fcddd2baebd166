"""Canonical result columns (docs/results.md), shared by the stages that write them
and the report that reads them."""

from __future__ import annotations

#: Training phases timed per iteration (``other_s`` is the remainder of ``iter_s``).
PHASES = ("sample_s", "load_s", "learn_s", "sync_s")

#: Health of the iteration's env runners and learners (rlperf.training.faults): healthy
#: remote env runners at its end, restarts and losses during it, learner failures.
FAULT_COLUMNS = (
    "env_runners_healthy",
    "env_runner_restarts",
    "env_runners_lost",
    "learner_failures",
    "oom_kills",
)

#: What each algorithm family adds to the phases (rlperf.algos.timing; docs/results.md
#: says which algorithm fills which): LearnerGroup.update calls, the replay buffer's time
#: and trained/sampled steps (DQN, SAC), the learner in-queue and policy lag (APPO, IMPALA).
ALGO_COLUMNS = (
    "learner_updates",
    "replay_s",
    "replay_ratio",
    "learner_queue_size",
    "policy_lag",
)

#: metrics.csv columns before the per-GPU ones, in file order.
TRAIN_COLUMNS = (
    "iteration",
    "time_s",
    # training seconds since the algorithm was built, evaluation left out (rlperf.training.target)
    "train_time_s",
    "excluded",  # empty, or why the row is left out (rlperf.layout.Exclusion)
    *PHASES,
    "iter_s",
    "other_s",
    "eval_s",  # RLlib's evaluation after the training step; not part of iter_s
    "env_steps",
    "env_steps_per_s",
    # env steps / sample_s / env runners / env_ceiling_steps_per_s (rlperf.envs.ceiling)
    "sampling_efficiency",
    "trained_steps",
    "trained_steps_per_s",
    "episodes",
    *ALGO_COLUMNS,
    "episode_return_mean",
    # mean return of this iteration's evaluation episodes (NaN without one), and their number
    "eval_return_mean",
    "eval_episodes",
    # evaluation episodes of this iteration that train.evaluation.max_episode_steps ended
    "eval_capped_episodes",
    "cpu_util_pct",
    "ram_util_pct",
    *FAULT_COLUMNS,
)

#: Per-step latency columns of the inference stages (steps.csv).
LATENCY_COLUMNS = ("forward_ms", "action_ms", "env_step_ms")

#: metrics.csv of ``stage=env``: one row per window of engine steps (rlperf.env_bench). The
#: training names where the meaning is the same, so the report ranks both on time per 1 000
#: env steps: ``iter_s`` is the window's time inside the engine's ``step`` calls.
ENV_WINDOW_COLUMNS = (
    "iteration",  # the window's number (1, 2, ...)
    "time_s",  # seconds since the job started, at the window's end
    "excluded",  # warmup for the warm-up window
    "iter_s",  # seconds inside the engine's step calls
    "env_steps",  # every env's steps (num_envs per call)
    "env_steps_per_s",  # env_steps / iter_s
    "frames_per_s",  # emulator frames: env_steps_per_s x the protocol's frames per step
    "calls",  # the engine's step calls
    "resets",  # episodes that ended (the engine reset them)
    "step_ms_p50",  # one step call (all num_envs envs), median
    "step_ms_p99",
    "action_s",  # choosing the actions (random, or the run's policy): not in iter_s
    "wall_s",  # the window's wall time (steps, actions, the loop)
    "cpu_cores",  # CPU seconds of this process and its children / wall_s
    "rss_mb",  # resident memory of this process and its children at the window's end
    "cpu_util_pct",  # the machine's, over the window
    "ram_util_pct",
)
