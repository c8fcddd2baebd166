"""Import RLlib 1.x / Ray Tune run folders and the 2021 study's rollout CSVs.

Mapping of a Tune ``progress.csv`` (RLlib 1.1, old API stack) onto the
canonical metrics of docs/results.md:

=====================  ==============================================================
canonical              RLlib 1.x column
=====================  ==============================================================
iteration              ``training_iteration``
time_s                 ``time_total_s``
iter_s                 ``time_this_iter_s`` (per iteration)
sample_s               ``timers/sample_time_ms`` / 1000  (window mean, see below)
load_s                 ``timers/load_time_ms`` / 1000    (loading the batch onto the
                       learner's devices, RLlib 1.x multi-GPU optimizer)
learn_s                ``timers/learn_time_ms`` / 1000   (the SGD epochs)
sync_s                 ``timers/update_time_ms`` / 1000  (weight sync to the workers)
other_s                ``iter_s`` minus the four phases
env_steps              difference of ``timesteps_total``
trained_steps          difference of ``info/num_steps_trained`` × ``num_sgd_iter``
                       (RLlib 1.x counts each sample once; rlperf counts every epoch)
episodes               ``episodes_this_iter``
episode_return_mean    ``episode_reward_mean`` (RLlib 1.x smooths it over the last
                       ``metrics_smoothing_episodes`` = 100 episodes)
cpu_util_pct           ``perf/cpu_util_percent`` (psutil, %)
ram_util_pct           ``perf/ram_util_percent`` (psutil, %)
gpu{i}_util_pct        ``perf/gpu_util_percent{i}`` × 100 (GPUtil reports a fraction)
gpu{i}_mem_used_pct    ``perf/vram_util_percent{i}`` × 100: GPUtil's memoryUtil is
                       memory *occupancy* (used / total), not NVML's memory-bus
                       utilisation (``gpu{i}_mem_util_pct``), so it gets its own column
=====================  ==============================================================

The four timers are means over a sliding window of the last 10 pushes
(``ray.util.timer._Timer(window_size=10)``), pushed once per iteration. With
``m_k`` the reported window mean after iteration ``k`` and ``x_k`` the time of
iteration ``k``::

    m_k = mean(x_1 .. x_k)            for k <= 10
    m_k = mean(x_{k-9} .. x_k)        for k > 10

so the per-iteration values follow exactly by inverting the window::

    x_k = k m_k - (k-1) m_{k-1}       for k <= 10
    x_k = x_{k-10} + 10 (m_k - m_{k-1})   for k > 10

The importer does this by default and checks it: the four reconstructed
phases must be non-negative and sum to at most ``time_this_iter_s`` (on the
study's 90 runs the remainder, ``other_s``, is 0.17-0.38 s per iteration). If
the check fails the window means are kept and the cell says so. The raw window
means stay available as ``*_win10`` columns.

Config axes come from ``params.json`` (``num_workers``, ``num_gpus``,
``num_gpus_per_worker``, ``model.dim``, ``model.conv_filters`` matched against
the study's models, docs/study.md) and from the run name for what params.json
cannot know: which card was visible (``gpu0``, ``gpu1``, ``both_gpus``, ``no_gpus``) and how Ray was
restricted to CPUs (``no_cpu_limit``, ``9_cpus_no_set_affinity``,
``9_cpus_set_affinity``, ``3_cpus``, ``cpu0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlperf.errors import CellError
from rlperf.layout import EXCLUDED_COLUMN
from rlperf.report.read import fingerprints
from rlperf.report.read.cells import Cell, match_model
from rlperf.report.read.discover import CellRef
from rlperf.report.read.load import (
    canonical_iterations,
    first_episode_warmup,
    flags_to_exclusion,
    read_csv,
    read_json,
)
from rlperf.results.columns import (
    ACTION_MS,
    CPU_UTIL_PCT,
    ENV_STEP_MS,
    ENV_STEPS,
    ENV_STEPS_PER_S,
    EPISODE_RETURN_MEAN,
    EPISODES,
    FORWARD_MS,
    ITER_S,
    ITERATION,
    LEARN_S,
    LOAD_S,
    OTHER_S,
    RAM_UTIL_PCT,
    SAMPLE_S,
    SYNC_S,
    TIME_S,
    TRAINED_STEPS,
    TRAINED_STEPS_PER_S,
)
from rlperf.results.protocol import STUDY_ENV_ID, legacy_env_protocol
from rlperf.specs.backends import backend_spec
from rlperf.specs.stages import Stage
from rlperf.vocabulary import RunStatus

#: Machines of the 2021 study (reference/thesis/README.md). Their fingerprints are not
#: in the run folders, so the importer supplies what the study's README says.
KNOWN_HOSTS: dict[str, dict[str, Any]] = {
    "volta1": {
        "machine": "volta1",
        "cpu": {"model": "Intel Xeon Gold 6138", "count": 40},
        "gpus": [
            {"index": 0, "name": "GeForce RTX 3090"},
            {"index": 1, "name": "Tesla V100-PCIE-32GB"},
        ],
        "edgetpu": False,
    },
    "artecslab001": {
        "machine": "artecslab001",
        "cpu": {"model": "Intel Core i9-9900K", "count": 16},
        "gpus": [],
        "edgetpu": "Coral M.2",
    },
}

#: Software of the study (README): RLlib 1.1.0 old API stack with TensorFlow 2.4.1, gym 0.18.
LEGACY_SOFTWARE = {"ray": "1.1.0", "tensorflow": "2.4.1", "gym": "0.18", "framework": "tf"}

#: Why a legacy cell's env protocol is the study's Pong-v0 without its files saying so.
STUDY_ENV_NOTE = (
    f"env protocol: {STUDY_ENV_ID} as the study's README says (sticky actions 0.25, ALE "
    "frameskip 2-4, deepmind wrappers); {where} names no env, so this is assumed"
)

LEGACY_NOTE = (
    "legacy RLlib 1.x run: sample/load/learn/sync timers are 10-iteration window means in "
    "progress.csv; GPU utilisation is a fraction (converted to %)"
)

_TIMERS = {
    SAMPLE_S: "timers/sample_time_ms",
    LOAD_S: "timers/load_time_ms",
    LEARN_S: "timers/learn_time_ms",
    SYNC_S: "timers/update_time_ms",
}

_BACKENDS = {
    "rllib": "rllib",
    "tflite": "tflite_fp32",
    "quant_tflite": "tflite_int8",
    "edgetpu": "edgetpu",
}


def dewindow(window_means: np.ndarray, window: int = 10) -> np.ndarray:
    """Invert a sliding-window mean (see module docstring); NaN stays NaN."""
    m = np.asarray(window_means, dtype=float)
    x = np.full_like(m, np.nan)
    for k in range(len(m)):
        n = k + 1
        prev = m[k - 1] if k else 0.0
        x[k] = n * m[k] - (n - 1) * prev if n <= window else x[k - window] + window * (m[k] - prev)
    return x


def _host_fingerprint(host: str) -> dict[str, Any]:
    known = next((v for k, v in KNOWN_HOSTS.items() if host.startswith(k)), None)
    fp: dict[str, Any] = dict(known) if known else {"machine": host or "unknown"}
    fp["software"] = dict(LEGACY_SOFTWARE)
    return fp


def _machine_line(fp: dict[str, Any]) -> str:
    parts = [str(fp.get("machine", "unknown"))]
    cpu = fp.get("cpu")
    if cpu:
        parts.append(f"{cpu['model']} ×{cpu['count']}")
    if fp.get("gpus"):
        parts.append(" + ".join(g["name"] for g in fp["gpus"]))
    if fp.get("edgetpu"):
        parts.append(f"Edge TPU ({fp['edgetpu']})")
    return ", ".join(parts) + " (RLlib 1.1, from the study's README)"


def gpu_layout_from(name: str, params: dict[str, Any]) -> tuple[str, str]:
    """(gpu_layout name, mode) from the run name and the GPU fractions in params.json."""
    driver = float(params.get("num_gpus") or 0.0)
    per_worker = float(params.get("num_gpus_per_worker") or 0.0)
    workers = int(params.get("num_workers") or 0)
    if driver == 0 and per_worker == 0:
        mode = "none"
    elif per_worker == 0:
        mode = "driver"
    else:
        mode = "shared"
    if mode == "none":
        return "none", mode
    if "both_gpus" in name:
        visible = "both"
    elif re.search(r"(^|_)gpu0(_|$)", name):
        visible = "gpu0"
    elif re.search(r"(^|_)gpu1(_|$)", name):
        visible = "gpu1"
    else:
        total = round(driver + per_worker * workers)
        visible = f"{total}gpu" if total == 1 else f"{total}gpus"
    return (f"{visible}_driver" if mode == "driver" else visible), mode


def cpu_affinity_from(name: str) -> str:
    """How the study restricted Ray's CPUs, read from the run name (see module docstring)."""
    if re.search(r"(?<!no_)set_affinity", name):
        return "pinned"
    if "no_set_affinity" in name or re.search(r"(^|_)\d+_cpus(_|$)", name):
        return "ray_cpus"
    if re.search(r"(^|_)cpu0(_|$)", name):
        # num_cpus_per_worker=0 and about one CPU busy: everything ran on CPU 0.
        return "pinned_cpu0"
    return "unrestricted"


def load_tune_run(ref: CellRef) -> Cell:
    """Read a Ray Tune run folder of RLlib 1.x (``params.json`` + ``progress.csv``); its
    phase times are recovered per iteration by inverting RLlib's 10-iteration window
    (checked; the window means stay as ``*_win10``)."""
    notes: list[str] = [LEGACY_NOTE]
    params = read_json(ref.path / "params.json")
    progress = read_csv(ref.path / "progress.csv", notes)
    if "training_iteration" not in progress.columns or "time_this_iter_s" not in progress:
        raise CellError("progress.csv: missing training_iteration / time_this_iter_s")
    if progress.empty:
        raise CellError("progress.csv: no iterations")
    name = ref.path.name
    model = params.get("model") or {}
    layout, mode = gpu_layout_from(name, params)
    axes: dict[str, Any] = {
        "source": "legacy",
        "stage": "train",
        "model": match_model(model.get("dim"), model.get("conv_filters")),
        "gpu_layout": layout,
        "workers": int(params.get("num_workers") or 0),
        "cpu_affinity": cpu_affinity_from(name),
        "backend": "rllib",
        "algo": "ppo" if "num_sgd_iter" in params and "clip_param" in params else "unknown",
        "env": params.get("env") or None,
    }
    leaves = {
        "gpu_layout.mode": mode,
        "gpu_layout.driver_gpus": float(params.get("num_gpus") or 0.0),
        "gpu_layout.gpus_per_worker": float(params.get("num_gpus_per_worker") or 0.0),
        "workers.num_cpus_per_worker": params.get("num_cpus_per_worker"),
        "workers.num_cpus_for_driver": params.get("num_cpus_for_driver"),
        "algo.train_batch_size": params.get("train_batch_size"),
        "algo.rollout_fragment_length": params.get("rollout_fragment_length"),
        "algo.minibatch_size": params.get("sgd_minibatch_size"),
        "algo.num_epochs": params.get("num_sgd_iter"),
        "algo.lr": params.get("lr"),
        "model.dim": model.get("dim"),
        "seed": params.get("seed"),
    }
    host = str(progress["hostname"].iloc[0]) if "hostname" in progress else ""
    fp = _host_fingerprint(host)
    cell = Cell(
        id=ref.id,
        path=ref.path,
        kind="tune",
        group=ref.group,
        status=RunStatus.completed,
        axes=axes,
        leaves=leaves,
        fingerprint=fingerprints.comparable(fp),
        machine=_machine_line(fp),
        host=host,
        notes=notes,
        warmup_rule="iterations before the first finished episode (episode_reward_mean NaN)",
    )
    cell.iterations = _tune_iterations(progress, params, notes)
    cell.env_protocol = legacy_env_protocol(params)
    if not params.get("env"):
        notes.append(STUDY_ENV_NOTE.format(where="params.json"))
    if "experiment_id" in progress:
        cell.run_key = f"tune:{progress['experiment_id'].iloc[0]}"
    if "timestamp" in progress:
        ts = pd.to_numeric(progress["timestamp"], errors="coerce")
        cell.started_at = float(ts.iloc[0] - progress["time_this_iter_s"].iloc[0])
        cell.ended_at = float(ts.iloc[-1])
    return cell


def _tune_iterations(
    progress: pd.DataFrame, params: dict[str, Any], notes: list[str]
) -> pd.DataFrame:
    p = progress
    it = pd.DataFrame(
        {
            ITERATION: p["training_iteration"].astype(int),
            TIME_S: p.get("time_total_s"),
            ITER_S: p["time_this_iter_s"].astype(float),
        }
    )
    for canon, col in _TIMERS.items():
        win = p[col].astype(float) / 1000.0 if col in p else pd.Series(np.nan, index=p.index)
        it[f"{canon}_win10"] = win
        it[canon] = dewindow(win.to_numpy())
    phases = it[list(_TIMERS)]
    rest = it[ITER_S] - phases.sum(axis=1, min_count=1)
    ok = bool((phases.fillna(0) >= -1e-3).all().all() and (rest.dropna() >= -0.05).all())
    if ok:
        notes.append(
            "phase times reconstructed per iteration by inverting the 10-iteration window "
            f"(remainder other_s {rest.min():.2f}-{rest.max():.2f} s per iteration)"
        )
    else:
        for canon in _TIMERS:
            it[canon] = it[f"{canon}_win10"]
        notes.append("window inversion failed its check: phase times are window means")
    it[OTHER_S] = it[ITER_S] - it[list(_TIMERS)].sum(axis=1, min_count=1)
    total = pd.to_numeric(p.get("timesteps_total"), errors="coerce")
    it[ENV_STEPS] = total.diff().fillna(total)
    it[ENV_STEPS_PER_S] = it[ENV_STEPS] / it[ITER_S]
    if "info/num_steps_trained" in p:
        trained = pd.to_numeric(p["info/num_steps_trained"], errors="coerce")
        epochs = float(params.get("num_sgd_iter") or 1)
        it[TRAINED_STEPS] = trained.diff().fillna(trained) * epochs
        it[TRAINED_STEPS_PER_S] = it[TRAINED_STEPS] / it[LEARN_S]
    it[EPISODES] = p.get("episodes_this_iter")
    it[EPISODE_RETURN_MEAN] = pd.to_numeric(p.get("episode_reward_mean"), errors="coerce")
    it[CPU_UTIL_PCT] = p.get("perf/cpu_util_percent")
    it[RAM_UTIL_PCT] = p.get("perf/ram_util_percent")
    for col in p.columns:
        m = re.fullmatch(r"perf/(gpu|vram)_util_percent(\d+)", col)
        if m:
            kind = "util" if m.group(1) == "gpu" else "mem_used"
            it[f"gpu{m.group(2)}_{kind}_pct"] = pd.to_numeric(p[col], errors="coerce") * 100.0
    it = canonical_iterations(it)
    it[EXCLUDED_COLUMN] = flags_to_exclusion(
        first_episode_warmup(it[EPISODE_RETURN_MEAN]), it.index
    )
    return it


_ROLLOUT_NAME = re.compile(r"model(\d+)_(rllib|tflite|quant_tflite|edgetpu)")
_WORKERS_NAME = re.compile(r"model(\d+)_(\d+)_workers_(no_gpus|gpu0|gpu1|both_gpus)")


@dataclass
class _Rollout:
    """What one of the study's rollout CSVs says: the axes its name gives, and its timings."""

    model: str
    backend: str
    stage: str
    workers: int
    gpu_layout: str
    latency: pd.DataFrame
    episodes: pd.DataFrame


def load_rollout_csv(ref: CellRef) -> Cell:
    """Read one of the study's rollout CSVs (rollout_results/...).

    ``artecslab001/modelN_<backend>.csv``: one row per episode with the mean
    time per action (``step_time_ms``; in the ``_rllib`` files that column is
    in seconds, so the importer uses ``total_model_time / steps``).
    ``volta1_updated/.../modelN_W_workers_<gpus>.csv``: one row for the whole
    run (10 episodes), ``average_model_time_per_step`` in seconds.
    """
    path = ref.path
    notes: list[str] = []
    df = read_csv(path, notes)
    host = path.parent.name
    if host.startswith("trained_"):  # volta1_updated/trained_modelN_gpu0/...
        notes.append(f"policy trained as {host.removeprefix('trained_')}")
        host = path.parent.parent.name
    read = _run_mean_rollout if ref.variant == "run_mean" else _episode_means_rollout
    rollout = read(df, path, notes)
    rollout.latency[FORWARD_MS] = np.nan
    rollout.latency[ENV_STEP_MS] = np.nan
    fp = _host_fingerprint(host)
    # The study's rollout files hold timings and returns only: its env, assumed.
    notes.append(STUDY_ENV_NOTE.format(where="the rollout file"))
    return Cell(
        id=ref.id,
        path=path,
        kind="rollout_csv",
        group=ref.group,
        status=RunStatus.completed,
        axes={
            "source": "legacy",
            "stage": rollout.stage,
            "model": rollout.model,
            "gpu_layout": rollout.gpu_layout,
            "workers": rollout.workers,
            "cpu_affinity": "unrestricted",
            "backend": rollout.backend,
            "algo": "ppo",
            "env": None,
        },
        fingerprint=fingerprints.comparable(fp),
        machine=_machine_line(fp),
        host=host,
        latency=rollout.latency,
        episodes=rollout.episodes,
        notes=notes,
        warmup_rule="none (the study timed every step)",
        env_protocol=legacy_env_protocol({}),
    )


def _run_mean_rollout(df: pd.DataFrame, path: Path, notes: list[str]) -> _Rollout:
    """``modelN_W_workers_<gpus>.csv``: one mean over the whole run (RLlib, seconds)."""
    m = _WORKERS_NAME.fullmatch(path.stem)
    if not m:
        raise CellError(f"{path.name}: name does not say model, workers and GPUs")
    model, workers, gpus = f"model{m.group(1)}", int(m.group(2)), m.group(3)
    layout = {"no_gpus": "none", "both_gpus": "both"}.get(gpus, gpus)
    if workers == 0 and layout != "none":
        layout += "_driver"
    row = df.iloc[0]
    per_step_s = pd.to_numeric(pd.Series([row["average_model_time_per_step"]]))[0]
    if not np.isfinite(per_step_s):
        raise CellError(f"{path.name}: no timing recorded (average_model_time_per_step NaN)")
    latency = pd.DataFrame(
        {
            "episode": [np.nan],
            "step": [np.nan],
            EXCLUDED_COLUMN: [""],
            ACTION_MS: [per_step_s * 1000.0],
            "n_steps": [float(row["num_steps"])],
            "granularity": ["run_mean"],
        }
    )
    episodes = pd.DataFrame(
        {"episode": [np.nan], "return": [float(row["reward"])], "length": [float(row["num_steps"])]}
    )
    notes.append(f"one mean over {int(row['episode'])} episodes; no per-step samples")
    return _Rollout(model, "rllib", "rollout", workers, layout, latency, episodes)


def _episode_means_rollout(df: pd.DataFrame, path: Path, notes: list[str]) -> _Rollout:
    """``modelN_<backend>.csv``: the mean time per action of every episode, on one machine."""
    m = _ROLLOUT_NAME.fullmatch(path.stem)
    if not m:
        raise CellError(
            f"{path.name}: name does not say model and backend "
            "(expected modelN_rllib|tflite|quant_tflite|edgetpu)"
        )
    model, backend = f"model{m.group(1)}", _BACKENDS[m.group(2)]
    steps = pd.to_numeric(df["steps"], errors="coerce")
    if "total_model_time" in df:
        per_step_ms = pd.to_numeric(df["total_model_time"], errors="coerce") / steps * 1000.0
        notes.append(
            "step_time_ms column of this file holds seconds; used total_model_time / steps instead"
        )
    else:
        per_step_ms = pd.to_numeric(df["step_time_ms"], errors="coerce")
    latency = pd.DataFrame(
        {
            "episode": df["episode"],
            "step": np.nan,
            EXCLUDED_COLUMN: "",
            ACTION_MS: per_step_ms,
            "n_steps": steps,
            "granularity": "episode_mean",
        }
    )
    episodes = pd.DataFrame({"episode": df["episode"], "return": df["reward"], "length": steps})
    notes.append("per-episode means of the time per action; no per-step samples")
    # The study's RLlib rollouts were rollout jobs, its exported models edge jobs.
    stage = str(Stage.rollout if backend_spec(backend).in_rllib else Stage.edge)
    return _Rollout(model, backend, stage, 0, "none", latency, episodes)


def load_legacy(ref: CellRef) -> Cell:
    """Dispatch on the kind of legacy cell."""
    if ref.kind == "tune":
        return load_tune_run(ref)
    return load_rollout_csv(ref)


def is_legacy(ref: CellRef) -> bool:
    """True for the legacy kinds handled here."""
    return ref.kind in ("tune", "rollout_csv")


__all__ = [
    "KNOWN_HOSTS",
    "dewindow",
    "gpu_layout_from",
    "cpu_affinity_from",
    "load_legacy",
    "load_rollout_csv",
    "load_tune_run",
    "is_legacy",
]
