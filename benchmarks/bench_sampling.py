"""Where a sampled env step goes, and the best sampling efficiency public options reach.

(a) Breakdown. One remote env runner (RLlib's SingleAgentEnvRunner, rlperf's
    config: model1 on Pong, ``--engines``, default ``python``: rlperf's wrappers,
    sync vectorisation) samples ``--steps`` env steps the way PPO's sample phase does
    (``synchronous_parallel_sample`` with metrics, then the driver's metrics
    aggregation), for 1, 4 and 8 envs per runner. With a C++ engine (``ale_vector``,
    ``ale_vector:2`` for 2 threads) the emulator runs inside the engine's step and is
    not timed apart: "env: preprocessing" is then the whole env step. Inside the
    runner every part of a step is timed by wrapping the function that does it:

    =====================  ===========================================================
    part                   timed function(s)
    =====================  ===========================================================
    env: emulator          ``ale_py.env.AtariEnv.step`` (4 frames per agent step)
    env: preprocessing     the vector env's ``step`` minus the emulator: rlperf's
                           wrappers (max of 2 frames, resize, frame stack, ...) and
                           gymnasium's SyncVectorEnv
    policy forward         ``RLModule.forward_exploration``
    connectors             the env-to-module and module-to-env pipelines (batching,
                           numpy -> torch, action sampling, unbatching)
    episode bookkeeping    ``SingleAgentEpisode.add_env_step / add_env_reset / cut /
                           to_numpy / validate``, ``unbatch``, the runner's episode
                           callbacks, new episodes, step metrics and ``get_metrics``
    transfer to learner    the driver's wall time of the sample call minus the
                           runner's own ``sample`` + ``get_metrics`` time: Ray call,
                           serialising the episodes, copying them, deserialising
    =====================  ===========================================================

    The measured step time is the driver's wall time of the whole sample phase
    over the env steps; "explained" is the sum of the parts over it (target: at
    least 90 %). A plain (un-instrumented) runner is timed the same way beside it,
    so the timers' own cost shows.

(b) Best efficiency with public options only: every combination of
    ``env_runner.num_envs`` (1, 4, 8), ``env.engine`` (python, gymnasium_async,
    ale_vector) and ``env_runner.torch_threads`` (1, 2), one env runner, plain
    RLlib classes. Efficiency = env steps per second of the sample phase /
    ``env_ceiling_steps_per_s`` (rlperf.envs.ceiling, measured right before each
    combination, in the driver).

    python benchmarks/bench_sampling.py [--steps 2000] [--repeats 3] [--skip-grid]
    python benchmarks/bench_sampling.py --skip-grid --engines python,ale_vector,ale_vector:2

Prints two tables (Markdown); docs/results.md#sampling-efficiency holds a measured run.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

os.environ.setdefault("RLLIB_TEST_NO_TF_IMPORT", "1")

PARTS = (
    "env: emulator",
    "env: preprocessing",
    "policy forward",
    "connectors",
    "episode bookkeeping",
    "transfer to learner",
)


# --------------------------------------------------------------------- config


def compose(*overrides: str) -> Any:
    """rlperf's composed config (model1, Pong, one env runner) with ``overrides``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from rlperf.config.schema import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=["model=model1", *overrides])


def algo_config(cfg: Any, steps: int, env_runner_cls: type | None = None) -> Any:
    """rlperf's PPO config for ``cfg`` with a batch of ``steps`` (optionally another runner)."""
    from rlperf.algos import build_algo_config, plan_resources

    cfg.algo.train_batch_size = steps
    cfg.algo.minibatch_size = min(int(cfg.algo.minibatch_size), steps)
    config = build_algo_config(cfg, plan_resources(cfg))
    if env_runner_cls is not None:
        config.env_runners(env_runner_cls=env_runner_cls)
    return config


# --------------------------------------------------------------- instrumented


class Timers:
    """Seconds per part, accumulated in the env runner's process."""

    def __init__(self) -> None:
        self.s: dict[str, float] = defaultdict(float)

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.perf_counter

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.s[part] += clock() - t0

        return timed

    def patch_class(self, part: str, cls: type, name: str) -> None:
        setattr(cls, name, self.wrap(part, getattr(cls, name)))


class TimedPipeline:
    """A connector pipeline whose calls are timed; everything else is the pipeline's."""

    def __init__(self, inner: Any, timers: Timers, part: str) -> None:
        self._inner, self._call = inner, timers.wrap(part, inner.__call__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def instrumented_runner_class() -> type:
    """A SingleAgentEnvRunner that times the parts of its steps (see the module docstring)."""
    from ray.rllib.env import single_agent_env_runner as sae
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    class InstrumentedEnvRunner(sae.SingleAgentEnvRunner):  # type: ignore[misc]
        def __init__(self, *, config: Any, **kwargs: Any) -> None:
            super().__init__(config=config, **kwargs)
            self.timers = t = Timers()
            from ale_py.env import AtariEnv

            t.patch_class("emulator", AtariEnv, "step")
            for name in ("add_env_step", "add_env_reset", "cut", "to_numpy", "validate"):
                t.patch_class("episode bookkeeping", SingleAgentEpisode, name)
            sae.unbatch = t.wrap("episode bookkeeping", sae.unbatch)
            for name in ("_make_on_episode_callback", "_new_episode", "_increase_sampled_metrics",
                         "_log_env_steps"):  # fmt: skip
                setattr(self, name, t.wrap("episode bookkeeping", getattr(self, name)))
            self._try_env_step = t.wrap("env step", self._try_env_step)
            self._env_to_module = TimedPipeline(self._env_to_module, t, "connectors")
            self._module_to_env = TimedPipeline(self._module_to_env, t, "connectors")
            self.module.forward_exploration = t.wrap(
                "policy forward", self.module.forward_exploration
            )
            self.sample = t.wrap("runner sample", self.sample)
            self.get_metrics = t.wrap("runner get_metrics", self.get_metrics)

        def pop_timers(self) -> dict[str, float]:
            out, self.timers.s = dict(self.timers.s), defaultdict(float)
            return out

    return InstrumentedEnvRunner


# --------------------------------------------------------------------- timing


def sample_phase(algo: Any, steps: int) -> tuple[float, int]:
    """PPO's sample phase once: (driver wall seconds, env steps sampled)."""
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS

    t0 = time.perf_counter()
    episodes, results = synchronous_parallel_sample(
        worker_set=algo.env_runner_group,
        max_env_steps=steps,
        sample_timeout_s=algo.config.sample_timeout_s,
        _uses_new_env_runners=True,
        _return_metrics=True,
    )
    algo.metrics.aggregate(results, key=ENV_RUNNER_RESULTS)
    wall = time.perf_counter() - t0
    return wall, sum(len(e) for e in episodes)


@contextmanager
def built(config: Any) -> Iterator[Any]:
    algo = config.build_algo()
    try:
        yield algo
    finally:
        algo.stop()


def breakdown(algo: Any, steps: int, repeats: int) -> dict[str, float]:
    """Seconds per env step of each part, summed over ``repeats`` sample phases (after one
    warm-up), plus ``measured`` (driver wall) and ``runner`` (sample + get_metrics inside)."""
    sample_phase(algo, steps)
    pop = algo.env_runner_group.foreach_env_runner(lambda r: r.pop_timers(), local_env_runner=False)
    wall = n = 0.0
    for _ in range(repeats):
        w, k = sample_phase(algo, steps)
        wall, n = wall + w, n + k
    (t,) = algo.env_runner_group.foreach_env_runner(
        lambda r: r.pop_timers(), local_env_runner=False
    )
    del pop
    runner = t["runner sample"] + t["runner get_metrics"]
    parts = {
        # A C++ engine's emulator runs inside its step: no AtariEnv.step call to time.
        "env: emulator": t.get("emulator", 0.0),
        "env: preprocessing": t["env step"] - t.get("emulator", 0.0),
        "policy forward": t["policy forward"],
        "connectors": t["connectors"],
        "episode bookkeeping": t["episode bookkeeping"] + t["runner get_metrics"],
        "transfer to learner": wall - runner,
    }
    out = {k: v / n for k, v in parts.items()}
    out.update(measured=wall / n, runner=runner / n, steps=n)
    return out


def plain_rate(algo: Any, steps: int, repeats: int) -> float:
    """Median env steps per second of the sample phase (one warm-up phase first)."""
    sample_phase(algo, steps)
    rates = []
    for _ in range(repeats):
        wall, n = sample_phase(algo, steps)
        rates.append(n / wall)
    return statistics.median(rates)


def ceiling(cfg: Any, seconds: float = 3.0) -> float:
    from rlperf.envs.ceiling import measure_ceiling
    from rlperf.envs.from_config import env_config

    n = int(cfg.env_runner.num_envs)
    return float(measure_ceiling(env_config(cfg), seconds, num_envs=n)["steps_per_s"])


# --------------------------------------------------------------------- tables


def engine_overrides(engine: str) -> list[str]:
    """``ale_vector:2`` -> ``env.engine=ale_vector env.threads=2`` (``python``: the engine)."""
    name, _, threads = engine.partition(":")
    return [f"env.engine={name}", *([f"env.threads={threads}"] if threads else [])]


def run_breakdown(steps: int, repeats: int, envs: list[int], engines: list[str]) -> None:
    print("\n(a) one sampled env step, model1 / Pong, 1 env runner")
    head = ["engine", "envs/runner", *PARTS, "sum of parts", "measured", "explained",
            "steps/s", "plain steps/s", "ceiling/s", "efficiency"]  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for engine, n_envs in ((e, n) for e in engines for n in envs):
        overrides = (f"env_runner.num_envs={n_envs}", *engine_overrides(engine))
        cfg = compose(*overrides)
        raw = ceiling(cfg)  # right before the row: the machine's load drifts
        with built(algo_config(cfg, steps, instrumented_runner_class())) as algo:
            b = breakdown(algo, steps, repeats)
        with built(algo_config(compose(*overrides), steps)) as algo:
            plain = plain_rate(algo, steps, repeats)
        total = sum(b[p] for p in PARTS)
        # A C++ engine steps the emulator in its own threads: not separable from its step.
        cells = [("(in the engine)" if p == "env: emulator" and not b[p] else f"{b[p] * 1e3:.3f}")
                 for p in PARTS]  # fmt: skip
        print(
            f"| {engine} | {n_envs} | " + " | ".join(cells) + f" | {total * 1e3:.3f} | "
            f"{b['measured'] * 1e3:.3f} | {total / b['measured']:.1%} | "
            f"{1 / b['measured']:.0f} | {plain:.0f} | {raw:.0f} | {plain / raw:.1%} |",
            flush=True,
        )
    print("(parts and step times in ms per env step; efficiency = plain steps/s / ceiling,")
    print(" the ceiling measured in the driver right before the row)")


def run_grid(steps: int, repeats: int) -> None:
    print("\n(b) public options, model1 / Pong, 1 env runner")
    print("| envs/runner | engine | torch_threads | ceiling/s | steps/s | efficiency |")
    print("|---|---|---|---|---|---|")
    best: tuple[float, str] = (0.0, "")
    for n_envs in (1, 4, 8):
        for mode in ("python", "gymnasium_async", "ale_vector"):
            for threads in (1, 2):
                overrides = (f"env_runner.num_envs={n_envs}", f"env.engine={mode}",
                             f"env_runner.torch_threads={threads}")  # fmt: skip
                cfg = compose(*overrides)
                raw = ceiling(cfg)
                with built(algo_config(cfg, steps)) as algo:
                    rate = plain_rate(algo, steps, repeats)
                eff = rate / raw
                best = max(best, (eff, " ".join(overrides)))
                print(f"| {n_envs} | {mode} | {threads} | {raw:.0f} | {rate:.0f} | {eff:.1%} |",
                      flush=True)  # fmt: skip
    print(f"best: {best[0]:.1%} with {best[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="env steps per sample phase")
    parser.add_argument("--repeats", type=int, default=3, help="timed sample phases")
    parser.add_argument("--envs", default="1,4,8", help="envs per runner for the breakdown")
    parser.add_argument(
        "--engines", default="python",
        help="env engines of the breakdown, name[:threads]: python,ale_vector,ale_vector:2",
    )  # fmt: skip
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--skip-breakdown", action="store_true")
    args = parser.parse_args()
    import ray

    threads = max(int(e.partition(":")[2] or 1) for e in args.engines.split(","))
    # A threaded engine's runner asks for its threads beside the driver's CPU.
    ray.init(num_cpus=max(os.cpu_count() or 1, 1 + threads), include_dashboard=False,
             log_to_driver=False, _node_ip_address="127.0.0.1")  # fmt: skip
    print(f"load average at start: {os.getloadavg()}")
    try:
        if not args.skip_breakdown:
            envs = [int(e) for e in args.envs.split(",")]
            run_breakdown(args.steps, args.repeats, envs, args.engines.split(","))
        if not args.skip_grid:
            run_grid(args.steps, args.repeats)
    finally:
        ray.shutdown()
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
