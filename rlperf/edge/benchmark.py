"""Play episodes with one policy variant and time every step.

Per step (``docs/results.md``): ``forward_ms`` (the interpreter's ``invoke``
or the torch forward alone), ``action_ms`` (observation in -> action out:
input quantization, set_tensor, invoke, get_tensor, argmax) and
``env_step_ms``. Episode ``i`` is reset with seed ``seed + i``, so every
variant plays the same episodes and returns are comparable.

The benchmark runs in a fresh Python process (``edge.isolate``, default
true): its peak RSS is the interpreter process's own (LiteRT, the env and the
model, without the TensorFlow converter or torch that the job process may
have loaded) and no thread pool of another library competes with the timed
kernels. The child also computes the variant's logits on the fidelity set
(after the play, so it does not count in the peak memory), with the same
interpreter and delegates that were timed.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rlperf
from rlperf.edge.edgetpu import load_edgetpu_delegate
from rlperf.layout import EXCLUDED_COLUMN
from rlperf.results.columns import WALL_S
from rlperf.results.latency import LatencyRecorder, timer_overhead_ns
from rlperf.tflite.calibration import ObservationSet
from rlperf.tflite.runtime import TfliteActor, TorchActor
from rlperf.tflite.tflite_model import ensure_cpu_runnable, read_tflite

MIB = 2**20


@dataclass
class BenchmarkSpec:
    """Everything the (child) benchmark process needs; plain data, picklable.

    ``kind`` is ``"tflite"`` (``model_path`` a ``.tflite``) or ``"torch"``
    (``model_path`` a ``rlperf_policy.pt``).
    """

    kind: str
    model_path: str
    env_config: dict[str, Any]
    num_actions: int
    out_dir: str | None  # None: play without writing steps.csv / episodes.csv
    episodes: int = 3
    steps: int | None = None
    warmup_steps: int = 50
    seed: int = 0
    threads: int = 1
    xnnpack: bool = True
    edgetpu_library: str | None = None  # load the Edge TPU delegate from this library
    edgetpu_device: str | None = None
    fidelity_path: str | None = None  # .npz observation set to compute logits on
    continuous: bool = False  # Box actions: num_actions is their dimensions


def _rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def peak_rss_bytes() -> int:
    """Peak RSS of this process image: ``VmHWM`` from ``/proc/self/status``.

    Not ``getrusage().ru_maxrss``: Linux carries that over ``execve``, so a child
    started from a big parent would report the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_actor(spec: BenchmarkSpec) -> Any:
    """The :class:`~rlperf.tflite.runtime.TfliteActor` or ``TorchActor`` for ``spec``."""

    if spec.kind == "torch":
        return TorchActor(spec.model_path, spec.threads)
    if spec.kind != "tflite":
        raise ValueError(f"unknown benchmark kind {spec.kind!r}")
    extra = []
    if spec.edgetpu_library:
        extra.append(("edgetpu", load_edgetpu_delegate(spec.edgetpu_library, spec.edgetpu_device)))
    else:
        ensure_cpu_runnable(read_tflite(Path(spec.model_path)), "tflite")
    return TfliteActor(
        spec.model_path, spec.num_actions, spec.threads, spec.xnnpack, extra, spec.continuous
    )


def make_env(spec: BenchmarkSpec) -> Any:
    """The benchmark's env (seeded per episode by :func:`play_episodes`)."""
    # rlperf.envs imports gymnasium, ale_py and cv2: loaded with the first env; importing
    # the benchmark (its spec, the child's entry) pulls only numpy and rlperf.tflite.
    from rlperf.envs.factory import make_env

    return make_env({**spec.env_config, "seed": None})


def play_episodes(
    actor: Any, spec: BenchmarkSpec, recorder: Any | None, env: Any | None = None
) -> list[dict[str, Any]]:
    """Play ``spec.episodes`` episodes (or ``spec.steps`` steps); return the finished episodes.

    Closes ``env`` (default: a new :func:`make_env`) at the end.
    """
    clock = time.perf_counter_ns
    env = env if env is not None else make_env(spec)
    finished: list[dict[str, Any]] = []
    total = 0
    episode = 0
    try:
        while True:
            if spec.steps is None and episode >= spec.episodes:
                break
            if spec.steps is not None and total >= spec.steps:
                break
            obs, _ = env.reset(seed=spec.seed + episode)
            ep_return, length, started = 0.0, 0, time.perf_counter()
            done = False
            while not done:
                t0 = clock()
                action = actor.act(obs)
                t1 = clock()
                obs, reward, terminated, truncated, _ = env.step(action)
                t2 = clock()
                if recorder is not None:
                    recorder.record_step(
                        episode, actor.forward_ns / 1e6, (t1 - t0) / 1e6, (t2 - t1) / 1e6, action
                    )
                ep_return += float(reward)
                length += 1
                total += 1
                done = terminated or truncated
                if spec.steps is not None and total >= spec.steps:
                    break
            if done:
                row: dict[str, Any] = {"episode": episode, "return": ep_return, "length": length}
                row["truncated"] = bool(truncated and not terminated)  # ended at the time limit
                row[WALL_S] = time.perf_counter() - started
                finished.append(row)
                if recorder is not None:
                    recorder.end_episode(episode, ep_return, length, row[WALL_S])
            episode += 1
    finally:
        env.close()
    return finished


def run_benchmark(spec: BenchmarkSpec) -> dict[str, Any]:
    """Load the variant, play, and return latency, episodes, delegate and memory figures.

    Writes ``steps.csv`` and ``episodes.csv`` into ``spec.out_dir`` (when set).
    """

    overhead = timer_overhead_ns()
    env = make_env(spec)
    rss_before = _rss_bytes()
    actor = make_actor(spec)
    rss_loaded = _rss_bytes()
    recorder = LatencyRecorder(Path(spec.out_dir), spec.warmup_steps) if spec.out_dir else None
    try:
        episodes = play_episodes(actor, spec, recorder, env)
    finally:
        if recorder is not None:
            recorder.close()
    peak = peak_rss_bytes()
    result: dict[str, Any] = {
        "episode_rows": episodes,
        "steps": recorder.steps if recorder is not None else None,
        "timer_overhead_ns": overhead,
        "memory": {
            # Peak RSS of the benchmark process (Python, numpy, env, runtime, model).
            "peak_rss_mb": peak / MIB,
            # RSS with the env built, before the model or interpreter was loaded.
            "rss_before_model_mb": rss_before / MIB,
            # What loading the model (interpreter, delegates, or torch + module) added.
            "model_rss_mb": (rss_loaded - rss_before) / MIB,
            "pid": os.getpid(),
        },
        "delegate": actor.delegate.to_dict() if actor.delegate is not None else None,
    }
    if recorder is not None:
        result["latency"] = recorder.latency_summary()
        result[EXCLUDED_COLUMN] = recorder.excluded()
        result["episodes"] = recorder.episode_summary()
    if spec.fidelity_path:
        fid = ObservationSet.load(Path(spec.fidelity_path))
        result["fidelity_logits"] = actor.logits(fid.observations)
    return result


def run_isolated(spec: BenchmarkSpec, isolate: bool = True) -> dict[str, Any]:
    """:func:`run_benchmark` in a fresh interpreter process (``isolate``), else in this one.

    The child is ``python -m rlperf.edge.benchmark SPEC RESULT`` (not
    ``multiprocessing``: that would re-import the caller's main module, which
    breaks unguarded scripts and Ray workers). An exception of the child (e.g.
    :class:`~rlperf.errors.EdgeTpuUnavailable`) is raised here.
    """
    if not isolate:
        return run_benchmark(spec)
    import pickle
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rlperf-bench-") as tmp:
        spec_file, result_file = Path(tmp) / "spec.pkl", Path(tmp) / "result.pkl"
        spec_file.write_bytes(pickle.dumps(spec))
        env = dict(os.environ)
        root = str(Path(rlperf.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "rlperf.edge.benchmark", str(spec_file), str(result_file)]
        proc = subprocess.run(cmd, env=env, check=False)
        if not result_file.is_file():
            raise RuntimeError(f"the benchmark process exited with {proc.returncode} and no result")
        status, payload = pickle.loads(result_file.read_bytes())
    if status == "error":
        raise payload
    return dict(payload)


def _child_main(spec_file: str, result_file: str) -> int:
    import pickle

    spec = pickle.loads(Path(spec_file).read_bytes())
    try:
        outcome: tuple[str, Any] = ("ok", run_benchmark(spec))
    except Exception as exc:  # handed to the parent, which raises it
        import traceback

        traceback.print_exc()
        try:
            pickle.dumps(exc)
        except Exception:
            exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        outcome = ("error", exc)
    Path(result_file).write_bytes(pickle.dumps(outcome))
    return 0 if outcome[0] == "ok" else 1


def reference_returns(
    policy_path: Path,
    env_config: dict[str, Any],
    episodes: int,
    steps: int | None,
    seed: int,
    threads: int = 1,
) -> list[float]:
    """Returns of the torch policy on the benchmark's seeded episodes (no timing, no files)."""

    spec = BenchmarkSpec(
        "torch", str(policy_path), dict(env_config), 0, None, episodes, steps, 0, seed, threads
    )
    rows = play_episodes(TorchActor(policy_path, threads), spec, None)
    return [float(r["return"]) for r in rows]


class RandomActor:
    """Uniformly random actions (numpy generator seeded with ``seed``) of the env's action
    space, Discrete or bounded Box: the baseline a reference policy must beat for its
    fidelity check to mean anything."""

    def __init__(self, action_space: Any, seed: int) -> None:
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.space = action_space
        self.forward_ns = 0
        self.delegate = None

    def act(self, obs: Any) -> Any:
        if hasattr(self.space, "n"):
            return int(self.space.start + self.rng.integers(int(self.space.n)))
        return self.rng.uniform(self.space.low, self.space.high).astype(self.space.dtype)


def random_returns(
    env_config: dict[str, Any], episodes: int, steps: int | None, seed: int
) -> list[float]:
    """Returns of a random policy on the benchmark's seeded episodes."""
    spec = BenchmarkSpec("random", "", dict(env_config), 0, None, episodes, steps, 0, seed)
    env = make_env(spec)
    rows = play_episodes(RandomActor(env.action_space, seed), spec, None, env)
    return [float(r["return"]) for r in rows]


if __name__ == "__main__":
    import sys

    sys.exit(_child_main(sys.argv[1], sys.argv[2]))
