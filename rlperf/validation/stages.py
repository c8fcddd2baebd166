"""Each stage's own checks, run after the groups' (the validator its spec names:
:mod:`rlperf.specs.stages`); ``stage=edge``'s are in :mod:`rlperf.validation.edge`."""

from __future__ import annotations

import math

from omegaconf import DictConfig

from rlperf.checks import positive
from rlperf.errors import ConfigError
from rlperf.results.latency import LATENCY_WINDOW
from rlperf.specs.backends import COMPRESSION_BACKENDS, backend_spec
from rlperf.validation.groups import validate_env_model


def validate_train(cfg: DictConfig) -> None:
    """``stage=train``: ``train.*``; training runs in RLlib; the env builds and fits the model."""
    if not backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=train: training runs in RLlib; "
            f"use backend=rllib, or stage=edge to benchmark {cfg.backend.name}"
        )
    positive("train.iterations", cfg.train.iterations)
    positive("train.warmup_iterations", cfg.train.warmup_iterations, allow_zero=True)
    positive("train.checkpoint_every", cfg.train.checkpoint_every, allow_zero=True)
    if cfg.train.torch_threads is not None:
        positive("train.torch_threads", cfg.train.torch_threads)
    positive("train.env_ceiling.duration_s", cfg.train.env_ceiling.duration_s)
    validate_stop(cfg)
    validate_env_model(cfg)


def validate_stop(cfg: DictConfig) -> None:
    """``train.stop.*`` and ``train.evaluation.*`` (time-to-target, docs/configuration.md#train)."""
    stop = cfg.train.stop
    ret = stop.episode_return
    if ret is not None and not math.isfinite(float(ret)):
        raise ConfigError(
            f"train.stop.episode_return={ret!r} is not valid; it must be a finite number "
            f"(the mean episode return that ends the run), or null"
        )
    for key in ("env_steps", "time_s"):
        if stop[key] is not None:
            positive(f"train.stop.{key}", stop[key])
    if stop.precision is not None:
        counted = int(cfg.train.iterations) - int(cfg.train.warmup_iterations)
        check_precision("train.stop.precision", stop.precision, counted, "counted iterations")
        if ret is not None:
            raise ConfigError(
                f"train.stop.precision={stop.precision} with train.stop.episode_return={ret}: "
                "the objective is then the time to target, one value per run, which has no "
                "within-run precision (repeats give its run-to-run precision: "
                "hydra.sweeper.repeats.precision); drop one of them"
            )
    if str(stop.judge) == "eval" and ret is not None:
        positive("train.evaluation.interval", cfg.train.evaluation.interval)
        positive("train.evaluation.episodes", cfg.train.evaluation.episodes)
        if cfg.train.evaluation.max_episode_steps is not None:
            positive("train.evaluation.max_episode_steps", cfg.train.evaluation.max_episode_steps)


#: Fewer values than this make no within-run interval worth stopping on.
MIN_PRECISION_VALUES = 4


def check_precision(key: str, value: float, cap: int, what: str) -> None:
    """A within-run precision target: in (0, 1), and at least
    :data:`MIN_PRECISION_VALUES` values (``cap``, named ``what``) to judge it on."""
    if not 0 < float(value) < 1:
        raise ConfigError(f"{key}={value} must be in (0, 1): 0.05 stops at ±5 %, or null")
    if cap < MIN_PRECISION_VALUES:
        raise ConfigError(
            f"{key}={value} needs at least {MIN_PRECISION_VALUES} {what} to judge a run's "
            f"interval on, and this run has at most {cap}; raise the cap or drop {key}"
        )


def validate_rollout(cfg: DictConfig) -> None:
    """``stage=rollout``: an upstream run, ``rollout.*``, and ``backend=rllib``."""
    if cfg.run is None and cfg.checkpoint is None:
        raise ConfigError("stage=rollout needs run=<training job folder> or checkpoint=<path>")
    r = cfg.rollout
    if not backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=rollout: the rollout stage runs the policy "
            f"in RLlib; use backend=rllib, or stage=edge to benchmark {cfg.backend.name}"
        )
    positive("rollout.episodes", r.episodes)
    positive("rollout.warmup_steps", r.warmup_steps, allow_zero=True)
    positive("rollout.torch_threads", r.torch_threads)
    if r.steps is not None:
        positive("rollout.steps", r.steps)
        if r.warmup_steps >= r.steps:
            raise ConfigError(
                f"rollout.warmup_steps={r.warmup_steps} >= rollout.steps={r.steps}: every step "
                f"would be warm-up and the latency summary empty; lower rollout.warmup_steps"
            )
    if r.precision is not None:
        if r.steps is None:
            raise ConfigError(
                f"rollout.precision={r.precision} needs rollout.steps: its looks are planned "
                f"on the windows of {LATENCY_WINDOW} steps the cap allows (episodes end when "
                "they end)"
            )
        windows = (int(r.steps) - int(r.warmup_steps)) // LATENCY_WINDOW
        what = f"windows of {LATENCY_WINDOW} timed steps"
        check_precision("rollout.precision", r.precision, windows, what)
    if r.device == "cuda" and not list(cfg.gpu_layout.visible_gpus):
        raise ConfigError(
            f"rollout.device=cuda with gpu_layout={cfg.gpu_layout.name}: no GPU is visible; "
            f"use a layout with GPUs (e.g. gpu0_driver) or rollout.device=cpu"
        )
    if r.start_algorithm is False and cfg.workers > 0:
        raise ConfigError(
            f"rollout.start_algorithm=false with workers={cfg.workers}: env runners exist only "
            f"in a started Algorithm; use workers=0 or rollout.start_algorithm=null"
        )


def validate_serve(cfg: DictConfig) -> None:
    """``stage=serve``: a policy or a model file, and ``serve.*``."""
    s = cfg.serve
    if cfg.run is None and cfg.checkpoint is None and cfg.model_path is None:
        raise ConfigError(
            "stage=serve needs run=<training job folder>, checkpoint=<path> or "
            "model_path=<file.tflite>"
        )
    if backend_spec(cfg.backend.name).on_edgetpu:
        raise ConfigError(
            "backend=edgetpu with stage=serve: the serve stage runs CPU backends; use "
            "backend=rllib or a tflite_* backend (stage=edge benchmarks the Edge TPU)"
        )
    if cfg.backend.name in COMPRESSION_BACKENDS:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=serve: compressed variants are built and "
            "benchmarked by stage=edge; serve the .tflite it wrote with model_path=<file> and "
            "backend=tflite_fp32 (or tflite_int8 for an int8 file)"
        )
    if cfg.model_path is not None and backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"model_path={cfg.model_path} with backend=rllib: a .tflite file is served by a "
            "tflite_* backend (e.g. backend=tflite_fp32)"
        )
    for key in ("replicas", "threads", "max_ongoing_requests", "max_batch_size",
                "requests_per_level", "baseline_requests", "observations"):  # fmt: skip
        if not isinstance(s[key], int) or s[key] < 1:
            raise ConfigError(f"serve.{key}={s[key]!r} must be an integer >= 1")
    for key in ("cpus_per_replica", "request_timeout_s", "max_send_lag_ms", "slo_ms"):
        positive(f"serve.{key}", s[key])
    positive("serve.batch_wait_timeout_s", s.batch_wait_timeout_s, allow_zero=True)
    positive("serve.warmup_requests", s.warmup_requests, allow_zero=True)
    if s.max_queued_requests < -1:
        raise ConfigError(
            f"serve.max_queued_requests={s.max_queued_requests} must be -1 (unbounded) or >= 0"
        )
    if s.max_batch_size > s.max_ongoing_requests:
        raise ConfigError(
            f"serve.max_batch_size={s.max_batch_size} > serve.max_ongoing_requests="
            f"{s.max_ongoing_requests}: a replica never holds enough requests to fill a batch; "
            f"raise serve.max_ongoing_requests to at least {s.max_batch_size}"
        )
    if not 0 < s.confidence < 1:
        raise ConfigError(f"serve.confidence={s.confidence} must be in (0, 1)")
    if any(not isinstance(c, int) or c < 1 for c in s.clients):
        raise ConfigError(f"serve.clients={list(s.clients)} must be integers >= 1")
    if any(r <= 0 for r in s.rates):
        raise ConfigError(f"serve.rates={list(s.rates)} must be request rates > 0 (per second)")
    if s.kill_replica_level is not None and not 0 <= s.kill_replica_level < len(s.rates):
        raise ConfigError(
            f"serve.kill_replica_level={s.kill_replica_level} must index serve.rates "
            f"({len(s.rates)} open-loop levels: 0..{len(s.rates) - 1}) or be null"
        )


def validate_env_stage(cfg: DictConfig) -> None:
    """``stage=env``: ``env_bench.*``; ``backend=rllib`` (nothing executes a policy but the
    run's torch network, with ``run=``)."""
    b = cfg.env_bench
    for key in ("steps", "windows", "torch_threads"):
        if not isinstance(b[key], int) or isinstance(b[key], bool) or b[key] < 1:
            raise ConfigError(f"env_bench.{key}={b[key]!r} must be an integer >= 1")
    positive("env_bench.warmup_steps", b.warmup_steps, allow_zero=True)
    num_envs = int(cfg.env_runner.num_envs)
    if b.steps < b.windows * num_envs:
        raise ConfigError(
            f"env_bench.steps={b.steps} is fewer than env_bench.windows={b.windows} x "
            f"env_runner.num_envs={num_envs} env steps (each window needs a step of every env); "
            f"raise env_bench.steps to at least {b.windows * num_envs} or lower env_bench.windows"
        )
    if b.precision is not None:
        check_precision("env_bench.precision", b.precision, int(b.windows), "windows")
    if not backend_spec(cfg.backend.name).in_rllib:
        raise ConfigError(
            f"backend={cfg.backend.name} with stage=env: stage=env times the env alone (random "
            "actions, or run=<training job>'s torch policy); use backend=rllib, or stage=edge "
            f"to benchmark {cfg.backend.name}"
        )
