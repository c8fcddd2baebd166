"""Downstream sweeps over upstream sweeps: which jobs a cell takes, and the cells the sweeper adds.

Fast tests on sweep folders written here (training jobs as the training stage
leaves them, rlperf.layout's file names); the real sweeps are in
tests/sweep/test_downstream_sweep_on_ray.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf
from support.run_folders import make_run

from rlperf.config.schema import RunMatchConfig, RunSelect
from rlperf.errors import CheckpointError
from rlperf.layout import (
    CONFIG_FILE,
    FINGERPRINT_FILE,
    METRICS_FILE,
    MULTIRUN_FILE,
    SUMMARY_FILE,
)
from rlperf.runs.checkpoint import load_trained_run
from rlperf.runs.jobs import (
    IDENTITY_KEYS,
    JobQuery,
    job_query,
    pick_jobs,
    runs_per_configuration,
    select_job,
    sweep_jobs,
)
from rlperf.runs.locate import find_run_dir
from rlperf.sweep.design import Design
from rlperf.sweep.upstream import expand_batch, upstream_label, with_run


def add_job(
    sweep: Path,
    num: int,
    *,
    model: str = "tiny",
    workers: int = 0,
    seed: int = 0,
    row: str | None = None,
    iter_s: float = 1.0,
    final_return: float | None = None,
    started: str = "2026-12-01T10:00:00+00:00",
    status: str = "completed",
) -> Path:
    """Job ``num`` of a training sweep, as the training stage and Hydra leave it."""
    job = make_run(sweep.parent / f"tmp{num}", workers=workers, seed=seed)
    cfg = OmegaConf.load(job / CONFIG_FILE)
    cfg.model.name = model
    cfg.gpu_layout = {"name": "none"}
    cfg.cpu_affinity = {"name": "unrestricted"}
    OmegaConf.save(cfg, job / CONFIG_FILE)
    overrides = [f"model={model}", f"workers={workers}", "train.iterations=2"]
    overrides += [f"study_training_row={row}"] if row else []
    OmegaConf.save(OmegaConf.create(overrides), job / ".hydra" / "overrides.yaml")
    choices = {"model": model, "study_training_row": row, "gpu_layout": "none"}
    OmegaConf.save(
        OmegaConf.create({"hydra": {"runtime": {"choices": choices}}}),
        job / ".hydra" / "hydra.yaml",
    )
    ret = "" if final_return is None else str(final_return)
    (job / METRICS_FILE).write_text(
        "iteration,excluded,iter_s,episode_return_mean\n"
        f"1,warmup,{iter_s * 3},\n2,,{iter_s},{ret}\n"
    )
    (job / SUMMARY_FILE).write_text(json.dumps({"status": status, "stage": "train"}))
    (job / FINGERPRINT_FILE).write_text(json.dumps({"start_time": started}))
    sweep.mkdir(exist_ok=True)
    (sweep / MULTIRUN_FILE).touch()
    return Path(shutil.move(job, sweep / str(num)))


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """tiny / tiny2 x workers 0 / 1, with distinct speeds, returns and start times."""
    root = tmp_path / "sweep"
    add_job(root, 0, workers=0, iter_s=2.0, final_return=-20.0, started="2026-12-01T10:00:00")
    add_job(root, 1, workers=1, iter_s=1.0, final_return=-21.0, started="2026-12-01T10:05:00")
    add_job(root, 2, model="tiny2", iter_s=3.0, started="2026-12-01T10:10:00")
    add_job(root, 3, model="tiny2", workers=1, iter_s=4.0, final_return=-19.0)
    return root


def test_identity_keys_are_the_run_match_keys() -> None:
    assert list(IDENTITY_KEYS) == [f.name for f in fields(RunMatchConfig)]
    assert [s.value for s in RunSelect] == ["all", "fastest", "best_return", "latest"]


def test_jobs_are_read_in_hydra_order_with_their_identity(sweep: Path) -> None:
    add_job(sweep, 10, seed=3, row="exp3")
    jobs = sweep_jobs(sweep)
    assert [j.path.name for j in jobs] == ["0", "1", "2", "3", "10"]  # 10 after 3
    assert jobs[-1].identity == {
        "study_training_row": "exp3",
        "seed": 3,
        "workers": 0,
        "gpu_layout": "none",
        "cpu_affinity": "unrestricted",
        "algo": "ppo",
        "env_id": "ALE/Pong-v5",
    }
    # The label shows the keys the job's own command line set: its sweep's axes.
    assert jobs[-1].label() == "10 (model=tiny, study_training_row=exp3, workers=0)"
    assert (jobs[0].iter_s(), jobs[0].final_return(), jobs[2].final_return()) == (2.0, -20.0, None)


def test_query_pairs_fans_out_and_selects(sweep: Path) -> None:
    def names(query: JobQuery) -> list[str]:
        return [j.path.name for j in pick_jobs(sweep, query)]

    assert names(JobQuery()) == ["0", "1", "2", "3"]
    assert names(JobQuery(model="tiny2")) == ["2", "3"]
    assert names(JobQuery(match=(("workers", "1"),))) == ["1", "3"]
    assert names(JobQuery(model="tiny", match=(("workers", "1"),))) == ["1"]
    assert names(JobQuery(select="fastest")) == ["1"]  # 1.0 s per counted iteration
    assert names(JobQuery(select="best_return")) == ["3"]  # -19; job 2 has no return
    assert names(JobQuery(select="latest")) == ["2"]
    assert names(JobQuery(model="tiny", select="best_return")) == ["0"]
    with pytest.raises(ValueError, match="run_select='slowest': expected one of all, fastest"):
        select_job(sweep_jobs(sweep), "slowest")


def test_only_completed_training_jobs_are_taken(sweep: Path) -> None:
    add_job(sweep, 4, model="tiny3", status="failed")
    with pytest.raises(CheckpointError) as err:
        pick_jobs(sweep, JobQuery(model="tiny3"))
    msg = str(err.value)
    assert "no trained job matches model=tiny3; the folder holds 0 (model=tiny, workers=0)" in msg
    assert "4 (model=tiny3, workers=0, status=failed)" in msg
    assert len(pick_jobs(sweep, JobQuery())) == 4


def test_a_single_run_needs_one_job(sweep: Path) -> None:
    with pytest.raises(CheckpointError) as err:
        find_run_dir(sweep, JobQuery(model="tiny"))
    msg = str(err.value)
    assert "sweep folder with 2 trained jobs matching model=tiny (0 (model=tiny, workers=0)" in msg
    assert f"choose it with run={sweep}/<job>" in msg and "run_select=" in msg
    assert find_run_dir(sweep, JobQuery(model="tiny", select="fastest")) == sweep / "1"
    assert find_run_dir(sweep / "2") == sweep / "2"  # a job folder is itself


def test_job_query_of_a_config(compose_cfg, sweep: Path) -> None:
    cfg = compose_cfg("stage=edge", f"run={sweep}", "model=tiny2", "run_match.workers=1")
    query = job_query(cfg, ["model=tiny2", "run_match.workers=1"])
    assert query == JobQuery(model="tiny2", match=(("workers", "1"),), select="all")
    # The composed default model names nothing; run_select is read as given.
    cfg = compose_cfg("stage=edge", f"run={sweep}", "run_select=latest")
    assert job_query(cfg, ["run_select=latest"]) == JobQuery(select="latest")
    with pytest.raises(Exception, match="run_select"):
        compose_cfg("stage=edge", "run_select=slowest")  # an Enum: composition refuses it


def test_source_names_the_sweep_job_and_its_identity(sweep: Path) -> None:
    trained = load_trained_run(sweep, None, query=JobQuery(model="tiny2", select="latest"))
    source = trained.describe()
    assert source["run"] == str(sweep / "2") and source["sweep"] == str(sweep)
    assert source["job"] == "2" and source["identity"]["model"] == "tiny2"
    assert source["identity"]["workers"] == 0
    assert source["overrides"] == ["model=tiny2", "workers=0", "train.iterations=2"]


# ------------------------------------------------------------------ the sweeper's expansion


@pytest.fixture
def loader(compose_cfg) -> Callable[[list[str]], DictConfig]:
    calls: list[list[str]] = []

    def load(overrides: list[str]) -> DictConfig:
        calls.append(list(overrides))
        cfg: DictConfig = compose_cfg(*overrides)
        return cfg

    load.calls = calls  # type: ignore[attr-defined]
    return load


def test_a_downstream_cell_fans_out_per_upstream_job(sweep: Path, loader: Any) -> None:
    batch = [["stage=edge", f"run={sweep}", f"backend={b}"] for b in ("tflite_fp32", "rllib")]
    cells = expand_batch(batch, loader, None)
    assert [c[1] for c in cells] == [f"run={sweep}/{n}" for n in "0123"] * 2
    assert [c[2] for c in cells] == ["backend=tflite_fp32"] * 4 + ["backend=rllib"] * 4


def test_expansion_pairs_selects_and_leaves_the_rest(sweep: Path, loader: Any) -> None:
    paired = [["stage=rollout", f"run={sweep}", f"model={m}"] for m in ("tiny", "tiny2")]
    assert [c[1] for c in expand_batch(paired, loader, None)] == [
        f"run={sweep}/{n}" for n in "0123"
    ]
    picked = [["stage=edge", f"run={sweep}", "run_match.workers=1", "run_select=best_return"]]
    assert expand_batch(picked, loader, None) == [
        [*picked[0][:1], f"run={sweep}/3", *picked[0][2:]]
    ]
    # No match: the cell stays as given and fails when it runs, naming what was there.
    nomatch = [["stage=edge", f"run={sweep}", "model=model1"]]
    assert expand_batch(nomatch, loader, None) == nomatch
    # Training cells, a job folder, and cells without run= are not touched.
    same = [
        ["model=tiny", "workers=0"],
        ["stage=edge", f"run={sweep}/2"],
        [f"run={sweep}", "stage=train"],
    ]
    loader.calls.clear()
    assert expand_batch(same, loader, None) == same
    assert len(loader.calls) == 2  # the list without run= is not even composed


def test_a_run_given_outside_the_cell_is_added(sweep: Path, loader: Any, monkeypatch) -> None:
    monkeypatch.chdir(sweep.parent)  # relative run paths are the working directory's
    cells = expand_batch([["stage=edge", "run=sweep", "model=tiny2"]], loader, None)
    assert cells == [
        ["stage=edge", "run=sweep/2", "model=tiny2"],
        ["stage=edge", "run=sweep/3", "model=tiny2"],
    ]
    assert with_run(["+run=x", "model=tiny"], "x/3") == ["+run=x/3", "model=tiny"]
    assert with_run(["model=tiny"], "my runs/it's") == ["model=tiny", "run='my runs/it\\'s'"]


def _default_design(cfg: DictConfig, **repeats: Any) -> Design:
    """``Design.of`` a composed job config under rlperf's sweeper defaults (``repeats``: the
    keys given on the command line)."""
    given = {"min": None, "max": None, "precision": None, "prior": None, **repeats}
    hydra = {"hydra": {"sweeper": {"repeats": given, "race": False}}}
    plain = OmegaConf.create(OmegaConf.to_container(cfg))  # the job's keys, without its schema
    return Design.of(OmegaConf.merge(plain, hydra))


def test_a_downstream_sweep_over_a_repeated_upstream_runs_each_cell_once(
    compose_cfg, sweep: Path
) -> None:
    """The upstream's runs of one configuration (command lines that differ only in seed:
    its repeats) are the downstream's repeats: by default each cell runs once, and the
    terminal line says why; a design the user gives, or an upstream of distinct
    configurations, keeps its runs."""
    edge = compose_cfg("stage=edge", f"run={sweep}")
    assert _default_design(edge).min == 2  # 4 distinct configurations: no repeats upstream
    for n, base in ((4, 0), (5, 2)):  # run 1 of jobs 0 and 2, as rlperf's rounds write it
        job = add_job(sweep, n, model=["tiny", "tiny2"][base // 2], seed=1000 + n)
        overrides = OmegaConf.load(sweep / str(base) / ".hydra" / "overrides.yaml")
        OmegaConf.save(OmegaConf.create([*overrides, f"seed={1000 + n}"]),
                       job / ".hydra" / "overrides.yaml")  # fmt: skip
    assert runs_per_configuration(sweep_jobs(sweep)) == 2
    design = _default_design(edge)
    assert (design.min, design.max, design.upstream_runs) == (1, 1, 2)
    assert design.describe().startswith("1 run per cell: the upstream sweep's 2 runs of each")
    assert "hydra.sweeper.repeats.min=2" in design.describe()
    assert _default_design(edge, min=2).min == 2  # asked for: kept
    assert _default_design(edge, max=4, precision=0.05).min == 2  # an adaptive design too
    assert _default_design(compose_cfg(f"run={sweep}")).min == 2  # a training sweep
    assert _default_design(compose_cfg("stage=edge", f"run={sweep}/0")).min == 2  # one job


def test_upstream_label_of_a_downstream_cell(compose_cfg, sweep: Path) -> None:
    assert (
        upstream_label(compose_cfg("stage=edge", f"run={sweep}/3")) == "3 (model=tiny2, workers=1)"
    )
    assert upstream_label(compose_cfg("stage=edge", f"run={sweep}")) is None  # not one job
    assert upstream_label(compose_cfg(f"run={sweep}/3")) is None  # a training cell


def test_the_sweeper_is_registered_and_selected() -> None:
    from hydra import compose, initialize_config_module
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    from rlperf.config.schema import register_configs

    names = {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Sweeper)}
    assert "hydra_plugins.rlperf_sweeper.sweeper.RlperfSweeper" in names
    node = ConfigStore.instance().load("hydra/sweeper/rlperf.yaml").node
    assert node._target_ == "hydra_plugins.rlperf_sweeper.sweeper.RlperfSweeper"
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):
            cfg = compose("config", overrides=["experiment=study_edge"], return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    assert cfg.hydra.sweeper._target_.endswith("RlperfSweeper")
    # A preset's axes reach the sweeper as with Hydra's basic sweeper.
    assert cfg.hydra.sweeper.params.backend == "rllib,tflite_fp32,tflite_int8,edgetpu"


def test_expanded_cells_have_stable_distinct_hashes(sweep: Path, loader: Any) -> None:
    """Resume keys cells by their hash: the job is part of it, and expanding again
    (a resumed sweep) gives the same cells."""
    from rlperf.sweep.cells import cell_hash

    batch = [["stage=rollout", f"run={sweep}"]]
    first = expand_batch(batch, loader, None)
    assert expand_batch(batch, loader, None) == first
    hashes = [cell_hash(loader(cell)) for cell in first]
    assert len(set(hashes)) == 4
    assert hashes == [cell_hash(loader(cell)) for cell in first]
