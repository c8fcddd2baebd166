"""Which configuration axes vary across the cells being compared, and readable labels.

A cell's axes are the canonical ones (:data:`~rlperf.report.read.cells.PRIMARY_AXES`)
plus every other config leaf. A primary axis is shown when its value varies
within the comparison set; another leaf is shown only when the axes already
shown do not determine it (so ``gpu_layout.driver_gpus`` stays hidden while
it merely follows ``gpu_layout``, and appears when two cells differ in it and
nothing else). Labels are built from those values, never from hashes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rlperf.errors import BaselineError
from rlperf.report.read.cells import PRIMARY_AXES, Cell
from rlperf.report.stats.repeats import Configuration, is_identity_key, run_suffixes


@dataclass
class AxisPlan:
    """The axes shown for one comparison set and the labels they produce."""

    axes: list[str]
    labels: dict[str, str]
    configs: dict[str, str]
    constants: dict[str, Any] = field(default_factory=dict)
    varying: list[str] = field(default_factory=list)
    quiet: dict[str, Any] = field(default_factory=dict)
    #: configuration id (its first cell's id) -> ``model · configuration`` (no seed)
    configuration_labels: dict[str, str] = field(default_factory=dict)

    def config_without(self, cell_values: dict[str, Any], drop: Sequence[str]) -> str:
        """A label from this plan's axes minus ``drop`` (e.g. workers for an x axis)."""
        return _config_text([a for a in self.axes if a not in drop], self.quiet, cell_values)


def within_set(labels: Sequence[str]) -> list[str]:
    """Configuration labels as one comparison set shows them: without the parts (`` · ``
    separated) that every label of the set shares, so a row says only what varies inside
    its set (``gpu0 · 8 workers`` beside ``both · 16 workers``, both ``legacy``). A label
    left with nothing (one configuration, or labels that are all alike) stays whole."""
    split = [str(label).split(" · ") for label in labels]
    shared = set.intersection(*(set(parts) for parts in split)) if split else set()
    out = []
    for label, parts in zip(labels, split, strict=True):
        kept = [p for p in parts if p not in shared]
        out.append(" · ".join(kept) if kept and len(split) > 1 else str(label))
    return out


def _config_text(axes: Sequence[str], quiet: dict[str, Any], values: dict[str, Any]) -> str:
    """A cell's configuration label: its values of ``axes`` except the model, and except
    values that are ``quiet`` (shared by most cells); ``all`` when nothing is left."""
    parts = [
        format_value(a, values.get(a))
        for a in axes
        if a != "model"
        and _display(_hashable(values.get(a))) is not None
        and not (a in quiet and _same(values.get(a), quiet[a]))
    ]
    return " · ".join(parts) or "all"


def _display(value: Any) -> Any:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def format_value(axis: str, value: Any) -> str:
    """How one axis value reads in a label."""
    value = _display(value)
    if axis == "workers":
        return f"{value} worker" + ("" if value == 1 else "s")
    if axis == "gpu_layout":
        return "no GPU" if value == "none" else str(value)
    if axis == "cpu_affinity" and value == "unrestricted":
        return "all CPUs"
    if axis in PRIMARY_AXES or axis == "group":
        return str(value)
    key = axis.split(".")[-1]
    text = str(value)
    if "/" in text and not text.startswith("["):
        text = "/".join(text.rstrip("/").split("/")[-2:])
    return f"{key}={text}"


def cell_values(cell: Cell) -> dict[str, Any]:
    """All axis and leaf values of a cell, plus ``group``."""
    return {**cell.leaves, **cell.axes, "group": cell.group}


def _frame(cells: Sequence[Cell]) -> pd.DataFrame:
    rows = []
    for c in cells:
        row = {k: _hashable(v) for k, v in cell_values(c).items()}
        rows.append(row)
    return pd.DataFrame(rows, index=[c.id for c in cells])


def _hashable(value: Any) -> Any:
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    return _display(value)


def _determined(df: pd.DataFrame, key: list[str], leaf: str) -> bool:
    if not key:
        return df[leaf].nunique(dropna=False) <= 1
    counts = df.groupby(key, dropna=False, sort=False)[leaf].nunique(dropna=False)
    return bool(counts.max() <= 1)


def _same(a: Any, b: Any) -> bool:
    a, b = _hashable(a), _hashable(b)
    if a is None or b is None or (isinstance(b, float) and pd.isna(b)):
        return (a is None or (isinstance(a, float) and pd.isna(a))) and (
            b is None or (isinstance(b, float) and pd.isna(b))
        )
    return bool(a == b)


def _n_dup(df: pd.DataFrame, key: list[str]) -> int:
    if not key:
        return len(df) if len(df) > 1 else 0
    return int(df.duplicated(key, keep=False).sum())


def plan_axes(cells: Sequence[Cell], configurations: Sequence[Configuration] = ()) -> AxisPlan:
    """Choose the axes to show for a comparison set and build labels.

    Order: varying primary axes (``stage`` only when the others do not
    determine it), then leaves needed to tell configurations apart (never a
    repeat key such as ``seed``: repeats share their configuration text).
    Configurations that are still identical get their sweep folder appended,
    then a replicate suffix ``#2``. A run of a repeated configuration
    (``configurations``, :mod:`rlperf.report.stats.repeats`) is labelled with its
    configuration plus ``seed=N`` (or ``run k``).
    """
    if not cells:
        return AxisPlan([], {}, {})
    first_of = {c.id: conf.id for conf in configurations for c in conf.cells}
    reps = [c for c in cells if first_of.get(c.id, c.id) == c.id]
    every, df = _frame(cells), _frame(reps)
    varying = _varying_primary_axes(df)
    axes = [*varying, *_distinguishing_leaves(df, varying)]
    constants = {
        a: _display(df[a].iloc[0])
        for a in PRIMARY_AXES
        if a in df and a not in axes and every[a].nunique(dropna=False) == 1
    }
    quiet = _quiet_values(df, axes)
    models = {c.id: str(cell_values(c).get("model")) for c in reps}
    configs = {c.id: _config_text(axes, quiet, cell_values(c)) for c in reps}
    configs = _tell_apart(reps, models, configs)
    labels = {c.id: _label(c, models[c.id], configs[c.id]) for c in reps}
    configuration_labels = dict(labels)
    for conf in configurations:
        for cid, suffix in run_suffixes(conf).items():
            configs[cid] = configs[conf.id]
            labels[cid] = f"{configuration_labels[conf.id]} · {suffix}"
    if "model" not in axes and "model" in df:
        axes.insert(0, "model")
    return AxisPlan(
        axes=axes,
        labels=labels,
        configs=configs,
        constants=constants,
        varying=list(varying) + _varying_leaves(every, varying),
        quiet=quiet,
        configuration_labels=configuration_labels,
    )


def _varying_primary_axes(df: pd.DataFrame) -> list[str]:
    """Primary axes whose value varies (``stage`` only when the others do not determine it)."""
    varying = [a for a in PRIMARY_AXES if a in df and df[a].nunique(dropna=False) > 1]
    if "stage" in varying and _determined(df, [a for a in varying if a != "stage"], "stage"):
        varying.remove("stage")
    return varying


def _distinguishing_leaves(df: pd.DataFrame, axes: list[str]) -> list[str]:
    """Leaves to add to ``axes`` until the cells are told apart, or no leaf helps.

    Greedy: the leaf that leaves the fewest cells indistinguishable first, and among
    those the one that splits the cells into the most groups (with three or more
    crossed axes, such as a scaling sweep's num_envs x env.engine x learners, no
    single leaf makes any cell unique; each still splits the groups); ties go to the
    leaf seen first (config file order).
    """
    chosen: list[str] = []
    candidates = [c for c in df.columns if c not in PRIMARY_AXES and is_identity_key(c)]
    # A leaf set in some cells and null in others (env.threads=2 beside the default) differs.
    candidates = [c for c in candidates if df[c].notna().any() and df[c].nunique(dropna=False) >= 2]
    while len(df) > 1 and _n_dup(df, [*axes, *chosen]) and candidates:
        key = [*axes, *chosen]
        scored = [
            (_n_dup(df, [*key, c]), -_n_groups(df, [*key, c]), i, c)
            for i, c in enumerate(candidates)
            if not _determined(df, key, c)
        ]
        if not scored:
            break
        best_dup, best_groups, _, best = min(scored)
        if (best_dup, best_groups) >= (_n_dup(df, key), -_n_groups(df, key)):
            break
        chosen.append(best)
        candidates.remove(best)
    return chosen


def _n_groups(df: pd.DataFrame, key: list[str]) -> int:
    """How many distinct combinations of ``key`` the cells have."""
    if not key:
        return 1
    return int(df.groupby(key, dropna=False, sort=False).ngroups)


def _varying_leaves(df: pd.DataFrame, varying: list[str]) -> list[str]:
    """Every non-primary leaf whose value varies, sorted."""
    return [
        c
        for c in sorted(df.columns)
        if c not in PRIMARY_AXES
        and c != "group"
        and c not in varying
        and df[c].notna().any()
        and df[c].nunique(dropna=False) > 1
    ]


def _quiet_values(df: pd.DataFrame, axes: list[str]) -> dict[str, Any]:
    """Leaf -> the value most cells (>= 75%) share; labels print the leaf only where it differs,
    so that e.g. num_cpus_per_worker=0 marks the two odd runs instead of cluttering every label."""
    quiet: dict[str, Any] = {}
    for a in axes:
        if a in PRIMARY_AXES:
            continue
        counts = df[a].value_counts(dropna=False)
        if len(counts) and counts.iloc[0] / len(df) >= 0.75:
            quiet[a] = counts.index[0]
    return quiet


def _tell_apart(
    cells: Sequence[Cell], models: dict[str, str], configs: dict[str, str]
) -> dict[str, str]:
    """Configuration labels made unique per model: identical-looking cells get their sweep
    folder (or failing that their own folder / file name: a legacy run name, a cell number),
    then a replicate suffix ``#2``."""
    collide = pd.Series({cid: f"{models[cid]}|{configs[cid]}" for cid in configs}).duplicated(
        keep=False
    )
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for cell in cells:
        config = configs[cell.id]
        if collide.get(cell.id, False):
            groups = {
                c.group
                for c in cells
                if models[c.id] == models[cell.id] and configs[c.id] == configs[cell.id]
            }
            where = cell.group.rsplit("/", 1)[-1] if len(groups) > 1 else cell.path.stem
            config = f"{config} ({where})" if config != "all" else where
        key = f"{models[cell.id]}|{config}"
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            config += f" #{seen[key]}"
        out[cell.id] = config
    return out


def _label(cell: Cell, model: str, config: str) -> str:
    """``model · configuration``; a cell without a model is named by what is known."""
    if model == "None":
        return config if config != "all" else cell.id
    return f"{model} · {config}" if config != "all" else model


def parse_baseline(text: str | None) -> dict[str, str] | None:
    """Parse ``key=value,key=value`` (``--baseline``)."""
    if not text:
        return None
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise BaselineError(f"--baseline: expected key=value, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def _matches(cell: Cell, spec: dict[str, str]) -> bool:
    values = cell_values(cell)
    values["cell"] = cell.id
    for key, want in spec.items():
        if key in values:
            got = values[key]
        else:
            hits = [v for k, v in values.items() if k.endswith("." + key)]
            if len(hits) != 1:
                return False
            got = hits[0]
        if str(_display(got)) != want:
            return False
    return True


def select_baselines(
    cells: Sequence[Cell],
    spec: dict[str, str] | None,
    warnings: list[str],
    first_of: Mapping[str, str] | None = None,
    workload_of: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Baseline configuration id per workload (``workload_of``: cell id -> its workload's
    label, :mod:`rlperf.report.compare.workloads`; the model where not given).

    With a ``spec``, the one configuration per workload with a cell matching
    every ``key=value`` (keys are axis names, dotted config keys, their last
    component, or ``cell``); ``first_of`` maps a cell id to its configuration's
    id (repeats of one configuration are one baseline). A model with several
    matching configurations gets a warning and no baseline; a spec that
    matches nothing at all raises :class:`BaselineError`. Without a spec,
    callers choose their default (the slowest configuration per model).
    """
    if not spec:
        return {}
    first_of, workload_of = first_of or {}, workload_of or {}
    by_model: dict[str, dict[str, None]] = {}
    for cell in cells:
        if _matches(cell, spec):
            model = workload_of.get(cell.id, str(cell.axes.get("model")))
            by_model.setdefault(model, {})[first_of.get(cell.id, cell.id)] = None
    if not by_model:
        wanted = ",".join(f"{k}={v}" for k, v in spec.items())
        raise BaselineError(f"--baseline {wanted} matches no completed cell")
    out: dict[str, str] = {}
    for model, hits in by_model.items():
        if len(hits) == 1:
            out[model] = next(iter(hits))
        else:
            warnings.append(
                f"baseline for {model} is ambiguous ({len(hits)} configurations match: "
                + ", ".join(list(hits)[:4])
                + "); add keys to --baseline. No speedups for this comparison."
            )
    return out
