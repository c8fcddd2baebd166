"""The names every job folder shares: its files and folders, the per-row exclusion column,
and the checks' fixed rules. The words written in those files (statuses, exclusion
reasons, families, objectives) are :mod:`rlperf.vocabulary`'s.

A job folder (``outputs/<date>/<time>`` or ``multirun/<date>/<time>/<n>``, see
``docs/results.md``) holds Hydra's ``.hydra/config.yaml``, ``fingerprint.json``,
``summary.json``, the stage's CSV files, and for a training job ``checkpoint/``:
the RLlib checkpoint plus ``rlperf_policy.pt`` (torch weights, reloads without
Ray) and ``probe.npz`` (observations with the logits the policy gave when it
was saved). A sweep folder adds Hydra's ``multirun.yaml``, the launcher's
``sweep.json`` and, per cell, ``cell.json``; a search adds ``search.json``.

Every stage, the sweep engine and the report read these names from here. This
module imports only the standard library, so reading a file name never pulls a
layer above it (config, numpy, torch).
"""

from __future__ import annotations

from pathlib import Path

# --- a job folder

#: Hydra's snapshot of the composed, resolved config (downstream stages reload it).
CONFIG_FILE = Path(".hydra", "config.yaml")
#: Hydra's own config of the job (``hydra.runtime.choices``: the group options composed).
HYDRA_FILE = Path(".hydra", "hydra.yaml")
#: The job's command-line overrides, as Hydra recorded them.
OVERRIDES_FILE = Path(".hydra", "overrides.yaml")
#: A downstream job's config with the upstream run's model / env / algo in force.
EFFECTIVE_CONFIG_FILE = "effective_config.yaml"
FINGERPRINT_FILE = "fingerprint.json"
SUMMARY_FILE = "summary.json"
TELEMETRY_FILE = "telemetry.csv"
METRICS_FILE = "metrics.csv"  # training: one row per iteration
STEPS_FILE = "steps.csv"  # rollout, edge: one row per step
EPISODES_FILE = "episodes.csv"  # rollout, edge: one row per finished episode
REQUESTS_FILE = "requests.csv"  # serve: one row per request
LEVELS_FILE = "levels.csv"  # serve: one row per load level

# --- a sweep folder (``multirun/<date>/<time>``)

#: Hydra's record of a sweep.
MULTIRUN_FILE = "multirun.yaml"
#: The launcher's index of every cell of the sweep (``rlperf.sweep.index``).
INDEX_FILE = "sweep.json"
#: File a cell's folder holds besides the job's own results (``rlperf.sweep.index``).
CELL_FILE = "cell.json"
#: What a search leaves in its sweep folder (``rlperf.sweep.search_results``).
SEARCH_FILE = "search.json"

#: Top-level config keys that are not part of a cell's identity (left out of
#: ``rlperf.sweep.cells.cell_hash``; the report pools repeats over the others).
#: ``hydra`` is Hydra's own node (paths, job numbers, times); ``ray`` says how Ray
#: is reached (address, dashboard, driver logs, overcommit permission), not what a
#: cell measures, so the same cell run locally or on a cluster is the same cell;
#: ``verbosity`` is what the terminal shows; ``tracking`` is where results are sent besides
#: the folder (docs/tracking.md). Every other value is part of a cell's
#: identity (a test perturbs each leaf of a composed config and checks that the
#: hash changes).
NON_IDENTITY_KEYS: tuple[str, ...] = ("hydra", "ray", "verbosity", "tracking")

#: Config groups renamed since older folders were written: old name -> the name today.
#: For folders written before the rename (rlperf before issue 24, conf/study/ and
#: conf/experiment_algo/), whose ``.hydra/hydra.yaml`` choices and ``overrides.yaml``
#: keys still say the old name: readers of a recorded folder go through
#: :func:`current_group`, so an old folder pairs, matches and is labelled as a new one.
RENAMED_GROUPS: dict[str, str] = {
    "study_training_row": "study/training_row",
    "study_rollout_row": "study/rollout_row",
    "algo_sizes@algo": "experiment_algo@algo",
}


def current_group(key: str) -> str:
    """The name today of a group choice or override key a recorded folder holds."""
    return RENAMED_GROUPS.get(key, key)


# --- a training job's checkpoint

#: A training job's checkpoint folder and the rlperf files in it.
CHECKPOINT_DIR = "checkpoint"
POLICY_FILE = "rlperf_policy.pt"
PROBE_FILE = "probe.npz"

#: Where the parts of an RLlib Algorithm checkpoint the rollout needs live.
RLLIB_METADATA = "rllib_checkpoint.json"
RL_MODULE_DIR = Path("learner_group", "learner", "rl_module", "default_policy")
ENV_TO_MODULE_DIR = Path("env_runner", "env_to_module_connector")
MODULE_TO_ENV_DIR = Path("env_runner", "module_to_env_connector")

#: Max abs logit error allowed between a reloaded policy and ``probe.npz``, by the
#: torch device the reloaded policy runs on. The probe is the same float32 network
#: on the same observations: on the CPU that is bit-identical in practice (1e-5
#: leaves room for another thread count's summation order), while GPU kernels
#: reorder and fuse sums (TF32 convolutions included), hence 1e-3. Both are far
#: below what another training's weights give (logits differ by ~1e-1 and more).
#: Relative above 1 (x the largest saved logit): a DQN's Q-values reach ~100, and its
#: saved network folds the dueling heads into one layer, which rounds differently.
PROBE_ATOL = {"cpu": 1e-5, "cuda": 1e-3}


def major_minor(version: str) -> tuple[str, ...]:
    """``("2", "49")`` of ``2.49.1`` (a local ``+...`` part dropped)."""
    return tuple(str(version).split("+")[0].split(".")[:2])


def compatible_version(saved: str, current: str) -> bool:
    """Same major.minor (rlperf and Ray both break checkpoint formats in minor releases)."""
    return major_minor(saved) == major_minor(current)


# --- the per-row exclusion column (its reasons: rlperf.vocabulary.Exclusion)

#: The per-row exclusion column of metrics.csv and steps.csv: empty when the row
#: counts, else the reason it is left out of summaries, rankings and figures
#: (the row stays in the file).
EXCLUDED_COLUMN = "excluded"


def is_excluded(value: object) -> bool:
    """Whether an :data:`EXCLUDED_COLUMN` value excludes its row (empty / NaN: it counts)."""
    return isinstance(value, str) and value != ""
