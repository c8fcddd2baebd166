"""Canonical result columns (docs/results.md), shared by the stages that write them
and the report that reads them.

Every column is one constant here, named as the column in upper case; the stages, the
report and the tests read the names from here, never retype them
(tests/project/test_vocabulary.py holds it).
"""

from __future__ import annotations

# rlperf.layout imports only the standard library too; the exclusion column is its.
from rlperf.layout import EXCLUDED_COLUMN

# --- the columns, one constant each

ITERATION = "iteration"
TIME_S = "time_s"
TRAIN_TIME_S = "train_time_s"
SAMPLE_S = "sample_s"
LOAD_S = "load_s"
LEARN_S = "learn_s"
SYNC_S = "sync_s"
ITER_S = "iter_s"
OTHER_S = "other_s"
EVAL_S = "eval_s"
ENV_STEPS = "env_steps"
#: The CPU packages' energy (RAPL, rlperf.telemetry.rapl): in telemetry.csv the joules since
#: the job's start, per iteration in metrics.csv the counter difference.
CPU_ENERGY_J = "cpu_energy_j"
ENV_STEPS_PER_S = "env_steps_per_s"
SAMPLING_EFFICIENCY = "sampling_efficiency"
TRAINED_STEPS = "trained_steps"
TRAINED_STEPS_PER_S = "trained_steps_per_s"
EPISODES = "episodes"
LEARNER_UPDATES = "learner_updates"
REPLAY_S = "replay_s"
REPLAY_RATIO = "replay_ratio"
LEARNER_QUEUE_SIZE = "learner_queue_size"
POLICY_LAG = "policy_lag"
EPISODE_RETURN_MEAN = "episode_return_mean"
EVAL_RETURN_MEAN = "eval_return_mean"
EVAL_EPISODES = "eval_episodes"
EVAL_CAPPED_EPISODES = "eval_capped_episodes"
CPU_UTIL_PCT = "cpu_util_pct"
RAM_UTIL_PCT = "ram_util_pct"
ENV_RUNNERS_HEALTHY = "env_runners_healthy"
ENV_RUNNER_RESTARTS = "env_runner_restarts"
ENV_RUNNERS_LOST = "env_runners_lost"
LEARNER_FAILURES = "learner_failures"
OOM_KILLS = "oom_kills"
FORWARD_MS = "forward_ms"
ACTION_MS = "action_ms"
ENV_STEP_MS = "env_step_ms"
FRAMES_PER_S = "frames_per_s"
CALLS = "calls"
RESETS = "resets"
STEP_MS_P50 = "step_ms_p50"
#: The objectives a precision target is set on: a run's time per 1 000 env steps (the
#: report's ``env_steps`` objective) and the median action latency of an inference run.
S_PER_1K_ENV_STEPS = "s_per_1k_env_steps"
ACTION_MS_P50 = "action_ms_p50"
STEP_MS_P99 = "step_ms_p99"
ACTION_S = "action_s"
WALL_S = "wall_s"
CPU_CORES = "cpu_cores"
RSS_MB = "rss_mb"

# --- the columns' groups

#: Training phases timed per iteration (``other_s`` is the remainder of ``iter_s``).
PHASES = (SAMPLE_S, LOAD_S, LEARN_S, SYNC_S)

#: Health of the iteration's env runners and learners (rlperf.training.faults): healthy
#: remote env runners at its end, restarts and losses during it, learner failures.
FAULT_COLUMNS = (
    ENV_RUNNERS_HEALTHY,
    ENV_RUNNER_RESTARTS,
    ENV_RUNNERS_LOST,
    LEARNER_FAILURES,
    OOM_KILLS,
)

#: What each algorithm family adds to the phases (rlperf.algos.timing; docs/results.md
#: says which algorithm fills which): LearnerGroup.update calls, the replay buffer's time
#: and trained/sampled steps (DQN, SAC, TQC), the learner in-queue and policy lag (APPO, IMPALA).
ALGO_COLUMNS = (
    LEARNER_UPDATES,
    REPLAY_S,
    REPLAY_RATIO,
    LEARNER_QUEUE_SIZE,
    POLICY_LAG,
)

#: metrics.csv columns before the per-GPU ones, in file order.
TRAIN_COLUMNS = (
    ITERATION,
    TIME_S,
    # training seconds since the algorithm was built, evaluation left out (rlperf.training.target)
    TRAIN_TIME_S,
    EXCLUDED_COLUMN,  # empty, or why the row is left out (rlperf.vocabulary.Exclusion)
    *PHASES,
    ITER_S,
    OTHER_S,
    EVAL_S,  # RLlib's evaluation after the training step; not part of iter_s
    ENV_STEPS,
    ENV_STEPS_PER_S,
    # env steps / sample_s / env runners / env_ceiling_steps_per_s (rlperf.envs.ceiling)
    SAMPLING_EFFICIENCY,
    TRAINED_STEPS,
    TRAINED_STEPS_PER_S,
    EPISODES,
    *ALGO_COLUMNS,
    EPISODE_RETURN_MEAN,
    # mean return of this iteration's evaluation episodes (NaN without one), and their number
    EVAL_RETURN_MEAN,
    EVAL_EPISODES,
    # evaluation episodes of this iteration that train.evaluation.max_episode_steps ended
    EVAL_CAPPED_EPISODES,
    CPU_UTIL_PCT,
    RAM_UTIL_PCT,
    *FAULT_COLUMNS,
)

#: Per-step latency columns of the inference stages (steps.csv).
LATENCY_COLUMNS = (FORWARD_MS, ACTION_MS, ENV_STEP_MS)

#: metrics.csv of ``stage=env``: one row per window of engine steps (rlperf.env_bench). The
#: training names where the meaning is the same, so the report ranks both on time per 1 000
#: env steps: ``iter_s`` is the window's time inside the engine's ``step`` calls.
ENV_WINDOW_COLUMNS = (
    ITERATION,  # the window's number (1, 2, ...)
    TIME_S,  # seconds since the job started, at the window's end
    EXCLUDED_COLUMN,  # warmup for the warm-up window
    ITER_S,  # seconds inside the engine's step calls
    ENV_STEPS,  # every env's steps (num_envs per call)
    ENV_STEPS_PER_S,  # env_steps / iter_s
    FRAMES_PER_S,  # emulator frames: env_steps_per_s x the protocol's frames per step
    CALLS,  # the engine's step calls
    RESETS,  # episodes that ended (the engine reset them)
    STEP_MS_P50,  # one step call (all num_envs envs), median
    STEP_MS_P99,
    ACTION_S,  # choosing the actions (random, or the run's policy): not in iter_s
    WALL_S,  # the window's wall time (steps, actions, the loop)
    CPU_CORES,  # CPU seconds of this process and its children / wall_s
    RSS_MB,  # resident memory of this process and its children at the window's end
    CPU_UTIL_PCT,  # the machine's, over the window
    RAM_UTIL_PCT,
)

# --- objectives (rlperf.report.stats.objectives): what the report ranks a family by

#: Time to the target return (``train.stop.episode_return``); the other training
#: objectives are named after the column they are computed from.
TIME_TO_TARGET = "time_to_target"
#: The objectives of the training family (``rlperf-report --objective`` chooses among them).
TRAINING_OBJECTIVES = (ENV_STEPS, TRAINED_STEPS, ITER_S, TIME_TO_TARGET)
