"""The report names the scale axes a sweep varies (env runners, envs per runner,
vectorisation, learners) and a user env by its entry point."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from support import synthetic

from rlperf.report.compare.axes import plan_axes
from rlperf.report.read.collect import load_cells
from rlperf.report.read.discover import discover
from rlperf.results.columns import PHASES


def _metrics(iter_s: float) -> pd.DataFrame:
    n = 3
    out = pd.DataFrame({"iteration": np.arange(1, n + 1), "excluded": ["warmup", "", ""]})
    for col in PHASES:
        out[col] = iter_s / 5
    out["iter_s"], out["other_s"] = iter_s, iter_s / 5
    out["time_s"] = out["iter_s"].cumsum()
    out["env_steps"], out["env_steps_per_s"] = 1000, 1000 / iter_s
    out["sampling_efficiency"] = 1000 / out["sample_s"] / 2600
    return out


def test_labels_name_every_varying_scale_axis(tmp_path) -> None:
    specs = []
    grid = list(itertools.product((0, 1), (1, 4), ("gymnasium_sync", "gymnasium_async"), (0, 1)))
    for i, (workers, envs, mode, learners) in enumerate(grid):
        config = synthetic.resolved_config(model="model1", gpu_layout="none", workers=workers,
                                           iterations=3, learners=learners,
                                           env_runner__num_envs=envs, env__engine=mode)  # fmt: skip
        overrides = [f"workers={workers}", f"env_runner.num_envs={envs}",
                     f"env.engine={mode}", f"learners={learners}"]  # fmt: skip
        specs.append(synthetic.CellSpec(config, overrides, summary={"status": "completed"},
                                        metrics=_metrics(5.0 + i)))  # fmt: skip
    synthetic.write_sweep(tmp_path / "sweep", specs)
    cells, skipped = load_cells(discover([tmp_path / "sweep"]).refs)
    assert not skipped and len(cells) == len(grid)
    plan = plan_axes(cells)
    for axis in ("workers", "env_runner.num_envs", "env.engine", "learners"):
        assert axis in plan.axes, plan.axes
    labels = set(plan.labels.values())
    assert len(labels) == len(grid)  # every cell told apart by its scale settings
    assert "model1 · 1 worker · learners=1 · num_envs=4 · engine=gymnasium_async" in labels


def test_custom_env_cells_are_named_by_entry_point(tmp_path) -> None:
    specs = []
    for entry in ("my_envs.grid:GridWorld", "rlperf.envs.frozenlake:FrozenLake"):
        config = synthetic.resolved_config(model="model1", gpu_layout="none", workers=1)
        config["model"] = synthetic.shipped_option("model", "mlp64")
        config["env"] = {**synthetic.shipped_option("env", "custom"), "entry_point": entry}
        specs.append(synthetic.CellSpec(config, ["env=custom", f"env.entry_point={entry}"],
                                        summary={"status": "completed"},
                                        metrics=_metrics(2.0)))  # fmt: skip
    synthetic.write_sweep(tmp_path / "sweep", specs)
    cells, _ = load_cells(discover([tmp_path / "sweep"]).refs)
    assert sorted(c.axes["env"] for c in cells) == [
        "my_envs.grid:GridWorld", "rlperf.envs.frozenlake:FrozenLake"
    ]  # fmt: skip
    plan = plan_axes(cells)
    assert "env" in plan.axes
    assert {c.axes["model"] for c in cells} == {"mlp64"}


def test_a_cell_with_every_iteration_excluded_is_reported(tmp_path) -> None:
    """The study's warm-up rule in runs too short to finish an episode (num_envs=8 on
    Pong) excludes every iteration: the report warns and notes it, never silently."""
    from rlperf.report.build import all_excluded_warnings, build_report

    specs = []
    for envs, flags in ((1, ["warmup", "", ""]), (8, ["warmup"] * 3)):
        config = synthetic.resolved_config(model="model1", gpu_layout="none", workers=1,
                                           iterations=3, env_runner__num_envs=envs)  # fmt: skip
        metrics = _metrics(5.0).assign(excluded=flags)
        summary = {"status": "completed",
                   "warmup": {"rule": "iterations before the first finished episode"}}  # fmt: skip
        specs.append(synthetic.CellSpec(config, [f"env_runner.num_envs={envs}"],
                                        summary=summary, metrics=metrics))  # fmt: skip
    synthetic.write_sweep(tmp_path / "sweep", specs)
    cells, _ = load_cells(discover([tmp_path / "sweep"]).refs)
    warnings = all_excluded_warnings(cells)
    assert len(warnings) == 1 and "all 3 iterations excluded (warmup 3" in warnings[0]
    assert "iterations before the first finished episode" in warnings[0]
    empty = [c for c in cells if c.notes and "not ranked" in c.notes[-1]]
    assert len(empty) == 1 and empty[0].axes.get("env_runner.num_envs", 8) == 8
    result = build_report([tmp_path / "sweep"], out=tmp_path / "report", figures=False)
    assert any("all 3 iterations excluded" in w for w in result.warnings)
    runs = pd.read_csv(tmp_path / "report" / "runs.csv")
    assert runs["notes"].fillna("").str.contains("all 3 iterations excluded").sum() == 1


def test_a_leaf_set_in_some_cells_and_null_in_others_is_an_axis(tmp_path) -> None:
    """env.threads=2 beside the default (null) tells cells apart by its value, not by their
    sweep folders, and is a column of the tables (a scaling curve per thread count)."""
    specs = []
    for i, (engine, threads) in enumerate(
        [("python", None), ("ale_vector", None), ("ale_vector", 2)]
    ):
        config = synthetic.resolved_config(model="model1", gpu_layout="none", workers=1,
                                           iterations=3, env__engine=engine,
                                           env__threads=threads)  # fmt: skip
        overrides = [f"env.engine={engine}"] + ([f"env.threads={threads}"] if threads else [])
        specs.append(synthetic.CellSpec(config, overrides, summary={"status": "completed"},
                                        metrics=_metrics(4.0 + i)))  # fmt: skip
    synthetic.write_sweep(tmp_path / "sweep", specs)
    cells, skipped = load_cells(discover([tmp_path / "sweep"]).refs)
    assert not skipped
    plan = plan_axes(cells)
    assert "env.threads" in plan.axes and "env.threads" in plan.varying
    assert sorted(plan.configs.values()) == [
        "engine=ale_vector", "engine=ale_vector · threads=2", "engine=python",
    ]  # fmt: skip
