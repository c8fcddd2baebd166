"""The ``rlperf_tune`` launcher without real sweeps: discovery, presets, hashing, pre-flight,
grouping and resume (the sweep engine run in-process with the Tune part faked), and Hydra's own
launcher test suite against a Ray started once for the module.

Real sweeps through the ``rlperf`` command are in ``test_sweeps_on_ray.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from support.search import search_corners

from hydra_plugins.rlperf_tune_launcher.launcher import RlperfTuneLauncher
from rlperf.algos import plan_resources
from rlperf.config.schema import RlperfConfig, register_configs
from rlperf.console import Console
from rlperf.errors import SweepIncomplete
from rlperf.layout import CELL_FILE, INDEX_FILE, NON_IDENTITY_KEYS, SUMMARY_FILE
from rlperf.resources.plan import Machine
from rlperf.sweep.cells import cell_hash, identity_config
from rlperf.sweep.index import CellRecord, SweepIndex, jsonable_return
from rlperf.sweep.progress import SweepProgress, format_duration, format_table
from rlperf.sweep.resources import (
    RayStart,
    bundle_totals,
    cell_request,
    cluster_axis_error,
    local_capacity,
    local_infeasibility,
    shortfall,
)
from rlperf.validation.validate import validate_config
from tests.conftest import REPO, group_options
from tests.sweep.conftest import multirun

# ------------------------------------------------------------------------ fixtures


@pytest.fixture
def compose_full() -> Iterator[Callable[..., DictConfig]]:
    """``compose_full(*overrides)`` -> the composed config *with* its ``hydra`` node."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="rlperf.conf", version_base="1.3"):

        def _compose(*overrides: str) -> DictConfig:
            return compose(
                config_name="config", overrides=list(overrides), return_hydra_config=True
            )

        yield _compose
    GlobalHydra.instance().clear()


def expand(cfg: DictConfig, *command_line: str) -> list[list[str]]:
    """The cells Hydra's basic sweeper makes of ``hydra.sweeper.params`` plus ``command_line``."""
    if cfg.hydra.sweeper.search.algorithm is not None:  # a search: its space's corners
        return search_corners(cfg.hydra.sweeper, list(command_line))
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
    parsed = OverridesParser.create().parse_overrides([*params, *command_line])
    batches = BasicSweeper.split_arguments(parsed, None)
    return [cell for batch in batches for cell in batch]


# ------------------------------------------------------------------- discovery


def test_plugin_is_discovered_and_registered() -> None:
    # Hydra's scanner loads plugin modules on its own, so compare by qualified name.
    names = {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Launcher)}
    assert "hydra_plugins.rlperf_tune_launcher.launcher.RlperfTuneLauncher" in names
    # A namespace package, as Hydra's own plugins: no __init__.py directly in hydra_plugins/.
    assert not (REPO / "hydra_plugins" / "__init__.py").exists()
    assert (REPO / "hydra_plugins" / "rlperf_tune_launcher" / "__init__.py").is_file()
    node = ConfigStore.instance().load("hydra/launcher/rlperf_tune.yaml").node
    assert node._target_ == "hydra_plugins.rlperf_tune_launcher.launcher.RlperfTuneLauncher"
    assert node.max_concurrent_trials == 1 and node.max_failures == 0
    assert node.strict is False and node.resume is True
    # Ray options are the job's ``ray`` node, not a second copy in the launcher's.
    assert "ray" not in node and "overcommit_cpus" not in node


def test_discovery_imports_neither_ray_nor_the_engine() -> None:
    code = (
        "import sys\n"
        "from hydra.core.plugins import Plugins\n"
        "from hydra.plugins.launcher import Launcher\n"
        "names = [c.__name__ for c in Plugins.instance().discover(Launcher)]\n"
        "assert 'RlperfTuneLauncher' in names, names\n"
        "engine = ('hydra_plugins.rlperf_tune_launcher._impl', 'rlperf.sweep.launch')\n"
        "heavy = [m for m in ('ray', 'torch', *engine) if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_multirun_uses_the_launcher_and_the_jobs_ray_options(compose_full) -> None:
    from rlperf.sweep.state import ray_options

    cfg = compose_full()
    assert cfg.hydra.launcher._target_.endswith("RlperfTuneLauncher")
    assert ray_options(cfg).address is None and ray_options(cfg).overcommit_cpus is False
    cfg = compose_full(
        "ray.address=127.0.0.1:6379", "ray.overcommit_cpus=true", "hydra.launcher.strict=true"
    )
    launcher = instantiate(cfg.hydra.launcher)
    # (Hydra's plugin scanner re-executes the module: compare classes by name.)
    assert type(launcher).__qualname__ == RlperfTuneLauncher.__qualname__
    assert launcher.options.strict is True
    assert ray_options(cfg).address == "127.0.0.1:6379"
    assert ray_options(cfg).overcommit_cpus is True
    # A plain Hydra app (no ray node) gets RayConfig's defaults.
    assert ray_options(OmegaConf.create({"x": 1})).address is None


# -------------------------------------------------------------------- presets

# Cells per preset (docs/sweeps.md). study_training: Exp1..Exp10 x models 1, 3, 4. study_cpu:
# 3 GPU layouts x 3 CPU settings x models 1, 3, 4 (the reference's volta1_cpus runs).
# serve_load: backend 3 x max_batch_size 2 x replicas 2 (docs/serve.md).
PRESET_CELLS = {"quickstart": 1, "study_sizes": 1, "study_training": 30, "study_cpu": 27,
                "scaling": 36, "scaling_small": 8, "cartpole_target": 1, "serve_load": 12,
                "serve_load_small": 2, "search_ppo_cartpole": 2, "algo_targets": 1}  # fmt: skip

# The study's training matrix (docs/study.md):
# row -> (workers, visible GPUs, driver GPUs, GPUs per worker).
SPEC_ROWS = {
    "exp1": (8, [], 0.0, 0.0),
    "exp2": (8, [0], 0.0001, 0.1249875),
    "exp3": (8, [0], 1.0, 0.0),
    "exp4": (8, [1], 0.0001, 0.1249875),
    "exp5": (8, [1], 1.0, 0.0),
    "exp6": (2, [0, 1], 0.001, 0.9995),
    "exp7": (4, [0, 1], 0.001, 0.49975),
    "exp8": (8, [0, 1], 0.001, 0.249875),
    "exp9": (8, [0, 1], 2.0, 0.0),
    "exp10": (16, [0, 1], 0.0001, 0.12499375),
}


@pytest.mark.parametrize("preset", group_options("experiment"))
def test_every_preset_composes_and_expands(compose_full, preset: str) -> None:
    cfg = compose_full(f"experiment={preset}")
    cells = expand(cfg)
    if preset in PRESET_CELLS:
        assert len(cells) == PRESET_CELLS[preset]
    else:  # a preset added later: it must at least compose and expand
        assert len(cells) >= 1
    assert len({tuple(c) for c in cells}) == len(cells)  # no cell twice


def test_study_training_row_group_holds_the_spec_rows(compose_full) -> None:
    assert set(group_options("study/training_row")) == set(SPEC_ROWS)
    for row, (workers, visible, driver, per_worker) in SPEC_ROWS.items():
        cfg = compose_full(f"study/training_row={row}")
        validate_config(cfg)
        plan = plan_resources(cfg)
        assert cfg.workers == workers, row
        assert list(plan.visible_gpus) == visible, row
        assert plan.driver_gpus == pytest.approx(driver, rel=1e-12), row
        assert plan.gpus_per_worker == pytest.approx(per_worker, rel=1e-12), row
        # Never more GPUs requested than visible (Exp10: 0.0001 + 16 x 0.1249 <= 2).
        assert plan.required_gpus <= len(visible) + 1e-9, row


def test_study_training_cells_are_the_spec_matrix(compose_full) -> None:
    base = compose_full("experiment=study_training")
    cells = expand(base)
    seen = set()
    for overrides in cells:
        cfg = compose_full("experiment=study_training", *overrides)
        validate_config(cfg)
        row = cfg.hydra.runtime.choices["study/training_row"]
        workers, visible, driver, per_worker = SPEC_ROWS[row]
        plan = plan_resources(cfg)
        assert (cfg.workers, list(plan.visible_gpus)) == (workers, visible)
        assert plan.driver_gpus == pytest.approx(driver, rel=1e-12)
        assert plan.gpus_per_worker == pytest.approx(per_worker, rel=1e-12)
        # The study's sizes, not the quickstart's.
        assert (cfg.train.iterations, cfg.algo.train_batch_size, cfg.algo.num_epochs) == (
            20,
            4000,
            30,
        )
        # RLlib accepts the cell (its own config validation runs here) and asks for
        # one bundle per env runner and learner, never more GPU than visible.
        req = cell_request(cfg)
        learners = plan.num_learners
        assert len(req.bundles) == 1 + workers + learners
        assert req.totals().get("CPU") == 1 + workers
        assert req.totals().get("GPU", 0.0) <= len(visible) + 1e-9
        seen.add((cfg.model.name, row))
    assert seen == {(m, r) for m in ("model1", "model3", "model4") for r in SPEC_ROWS}
    # A subset from the command line replaces the preset's axis.
    assert len(expand(base, "model=model1", "study/training_row=exp1,exp3")) == 2


def test_study_cpu_cells_need_nine_ray_starts(compose_full) -> None:
    cells = expand(compose_full("experiment=study_cpu"))
    starts = {}
    for overrides in cells:
        cfg = compose_full("experiment=study_cpu", *overrides)
        validate_config(cfg)
        plan = plan_resources(cfg)
        assert cfg.workers == 8 and cfg.gpu_layout.mode == "shared"
        start = RayStart(plan.visible_gpus, plan.ray_num_cpus, plan.affinity)
        starts.setdefault(start, []).append(cfg.model.name)
        mode = cfg.cpu_affinity.mode
        assert cell_request(cfg).totals()["CPU"] == 9  # RLlib accepts the cell
        assert plan.ray_num_cpus == (None if mode == "unrestricted" else 9)
        assert plan.affinity == (tuple(range(9)) if mode == "pinned" else None)
    # 3 GPU sets x 3 ways to start Ray; the 3 models of each share a Ray instance.
    assert len(starts) == 9
    assert all(sorted(m) == ["model1", "model3", "model4"] for m in starts.values())


# ---------------------------------------------------------------------- hashing


def test_cell_hash_is_the_resolved_config_minus_hydra_and_ray(compose_full) -> None:
    a = compose_full("model=tiny", "workers=1")
    b = compose_full("workers=1", "model=tiny", "hydra.job.name=other", "ray.address=x:1")
    c = compose_full("model=tiny", "workers=2")
    assert cell_hash(a) == cell_hash(b)
    assert cell_hash(a) != cell_hash(c)
    ident = identity_config(a)
    assert "hydra" not in ident and "ray" not in ident
    assert ident["env"]["dim"] == 42  # interpolations resolved (${model.dim})
    # 16 lowercase hex digits: the head of the SHA-256 of the identity's compact sorted JSON,
    # the same from a config composed again (resume finds recorded cells by it).
    assert re.fullmatch(r"[0-9a-f]{16}", cell_hash(a))
    blob = json.dumps(ident, sort_keys=True, default=str, separators=(",", ":"))
    assert cell_hash(a) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert cell_hash(compose_full("model=tiny", "workers=1")) == cell_hash(a)
    # Plain mappings hash by value, whatever the key order.
    assert cell_hash({"x": 1, "y": [1, 2]}) == cell_hash({"y": [1, 2], "x": 1})


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every leaf of a plain config (dict values, list items; empty containers are leaves)."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        if isinstance(value, dict | list) and value:
            yield from _leaves(value, (*path, key))
        else:
            yield (*path, key), value


def _other_value(value: Any) -> Any:
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, list):
        return [*value, 1]
    if isinstance(value, dict):
        return {**value, "~": 1}
    return "~"  # None


def test_every_value_outside_the_non_identity_keys_changes_the_cell_hash(compose_full) -> None:
    """Perturb each leaf of a composed config in turn: the cell hash changes, unless the leaf
    is under NON_IDENTITY_KEYS (then it must not). A hash that ignored a config group (or
    one value) would let a resumed sweep keep one cell's results for another."""
    # The documented list (docs/sweeps.md#resume): changing it is a decision, not a slip.
    assert NON_IDENTITY_KEYS == ("hydra", "ray", "verbosity", "tracking")
    task = compose_full("stage=train")
    with read_write(task), open_dict(task):
        del task["hydra"]  # as the launcher hashes a cell: its job config
    base = OmegaConf.to_container(task, resolve=True)
    assert isinstance(base, dict)
    reference = cell_hash(task)
    assert cell_hash(OmegaConf.create(base)) == reference
    leaves = list(_leaves(base))
    # The whole config: a leaf under every key of the primary schema.
    assert {path[0] for path, _ in leaves} == {f.name for f in dataclasses.fields(RlperfConfig)}
    wrong = []
    for path, value in leaves:
        changed = copy.deepcopy(base)
        parent = functools.reduce(lambda node, key: node[key], path[:-1], changed)
        parent[path[-1]] = _other_value(value)
        same = cell_hash(OmegaConf.create(changed)) == reference
        if same != (path[0] in NON_IDENTITY_KEYS):
            wrong.append(".".join(map(str, path)))
    assert wrong == []


# -------------------------------------------------------------- requests, pre-flight


def test_cell_request_is_rllibs_own(compose_full) -> None:
    req = cell_request(compose_full("workers=2"))
    assert req.bundles == [{"CPU": 1.0}] * 3 and req.strategy == "PACK"
    assert req.ray_start == RayStart((), None, None)
    exp10 = cell_request(compose_full("study/training_row=exp10"))
    assert exp10.bundles[0] == pytest.approx({"CPU": 1.0, "GPU": 0.0001})
    assert len(exp10.bundles) == 17
    assert all(b == pytest.approx({"CPU": 1.0, "GPU": 0.1249}) for b in exp10.bundles[1:])
    assert exp10.totals()["GPU"] <= 2.0 and exp10.totals()["CPU"] == 17
    # Two data-parallel learners: one whole-GPU bundle each, no CPU of their own.
    exp9 = cell_request(compose_full("study/training_row=exp9"))
    assert exp9.bundles.count({"GPU": 1.0}) == 2 and exp9.totals() == {"CPU": 9.0, "GPU": 2.0}
    pinned = cell_request(compose_full("workers=3", "cpu_affinity=pinned"))
    assert pinned.ray_start == RayStart((), 4, (0, 1, 2, 3))
    edge = cell_request(compose_full("stage=edge", "run=/x", "backend=tflite_fp32"))
    assert edge.bundles == [{"CPU": 1.0}]
    assert cell_request(DictConfig({"foo": 1})).bundles == [{"CPU": 1.0}]


def test_preflight_explains_what_cannot_run(compose_full) -> None:
    small = Machine(cpus=(0, 1), gpus=0, gpu_source="test")
    gpu = cell_request(compose_full("gpu_layout=gpu0_driver", "workers=1"))
    reason = local_infeasibility(gpu, small, overcommit_cpus=False)
    assert reason is not None and "GPU(s) [0]" in reason and "0 NVIDIA GPU" in reason
    big = cell_request(compose_full("workers=3"))
    reason = local_infeasibility(big, small, overcommit_cpus=False)
    assert reason is not None and "4" in reason and "overcommit" in reason
    assert local_infeasibility(big, small, overcommit_cpus=True) is None
    assert local_capacity(big.ray_start, [big], small, True) == {"CPU": 4.0, "GPU": 0.0}
    assert local_capacity(big.ray_start, [big], small, False) == {"CPU": 2.0, "GPU": 0.0}
    pinned = cell_request(compose_full("workers=3", "cpu_affinity=pinned"))
    reason = local_infeasibility(pinned, small, overcommit_cpus=False)
    assert reason is not None and "CPUs 2-3 do not exist" in reason
    assert local_infeasibility(cell_request(compose_full("workers=1")), small, False) is None


def test_learner_cpus_count_in_rllibs_request_and_the_plan(compose_full) -> None:
    """A CPU learner actor is a bundle of its own; the plan counts what RLlib asks for."""
    small = Machine(cpus=(0, 1), gpus=0, gpu_source="test")
    for overrides, cpus in ((("learners=2", "workers=1"), 4), (("learners=1", "workers=0"), 2),
                            (("learners=0", "workers=1"), 2)):  # fmt: skip
        req = cell_request(compose_full(*overrides))
        assert req.totals()["CPU"] == cpus == plan_resources(compose_full(*overrides)).required_cpus
    two = cell_request(compose_full("learners=2", "workers=1"))
    # The driver, the env runner, two learner actors: RLlib's bundles, a CPU each.
    assert two.bundles == [{"CPU": 1.0}] * 4
    reason = local_infeasibility(two, small, overcommit_cpus=False)
    assert reason is not None and "learners=2 needs 4 CPU bundles" in reason
    assert local_infeasibility(two, small, overcommit_cpus=True) is None


def test_scaling_small_fits_two_cpus_and_scaling_needs_more(compose_full) -> None:
    small = compose_full("experiment=scaling_small")
    needs = [
        plan_resources(compose_full("experiment=scaling_small", *cell)).required_cpus
        for cell in expand(small)
    ]
    assert max(needs) == 2 and min(needs) == 1
    full = compose_full("experiment=scaling")
    needs = sorted(
        plan_resources(compose_full("experiment=scaling", *cell)).required_cpus
        for cell in expand(full)
    )
    assert needs.count(2) == 6 and needs[-1] == 6  # workers=1 learners=0 .. workers=4 learners=1


def test_shortfall_checks_totals_and_nodes() -> None:
    bundles = [{"CPU": 1.0, "GPU": 0.0001}] + [{"CPU": 1.0, "GPU": 0.1249}] * 16
    two_gpus = {"CPU": 32.0, "GPU": 2.0}
    assert shortfall(bundles, two_gpus) is None
    assert bundle_totals(bundles)["GPU"] == pytest.approx(1.9985)
    reason = shortfall(bundles, {"CPU": 8.0, "GPU": 2.0})
    assert reason is not None and "17 CPU" in reason and "Ray has 8" in reason
    # Enough GPU in total, but no node holds a whole one.
    halves = [{"CPU": 4.0, "GPU": 0.5}, {"CPU": 4.0, "GPU": 0.5}]
    reason = shortfall([{"GPU": 1.0}], {"CPU": 8.0, "GPU": 1.0}, halves)
    assert reason is not None and "fits on no node" in reason


def test_cluster_refuses_ray_start_settings() -> None:
    assert cluster_axis_error(RayStart((0, 1))) is None
    assert cluster_axis_error(RayStart(())) is None
    pinned = cluster_axis_error(RayStart((), 9, tuple(range(9))))
    assert pinned is not None and "cpu_affinity" in pinned and "0-8" in pinned
    counted = cluster_axis_error(RayStart((), 9, None))
    assert counted is not None and "num_cpus=9" in counted
    gpu1 = cluster_axis_error(RayStart((1,)))
    assert gpu1 is not None and "[1]" in gpu1


# ------------------------------------------------------------- progress, index


def _rec(num: int, status: str, wall: float | None = None, reason: str | None = None) -> CellRecord:
    return CellRecord(f"h{num}", [f"workers={num}"], str(num), num, status, reason, wall_s=wall)


def test_progress_line_counts_and_eta() -> None:
    import io

    out = io.StringIO()
    progress = SweepProgress(concurrency=1, console=Console(stream=out, interactive=False))
    recs = [_rec(0, "completed", 40.0), _rec(1, "running"), _rec(2, "pending"), _rec(3, "skipped")]
    assert progress.eta_s(recs) is None  # nothing finished in this session yet
    progress.walls += [40.0, 20.0]
    # mean 30 s x (1 pending + half of 1 running)
    assert progress.eta_s(recs) == pytest.approx(45.0)
    progress.emit("started", recs[1], recs)
    line = out.getvalue()
    assert "started" in line and "#1 workers=1" in line
    assert "2/4 done, 1 completed, 1 skipped, 1 running" in line and "ETA 45s" in line
    assert SweepProgress(concurrency=2).concurrency == 2
    assert [format_duration(s) for s in (5, 75, 3700)] == ["5s", "1m15s", "1h01m"]


def test_final_table_lists_every_cell() -> None:
    recs = [_rec(1, "failed", 3.0, "ValueError: boom\nmore"), _rec(0, "completed", 61.0)]
    lines = format_table(recs).splitlines()
    assert lines[0].split() == ["#", "status", "wall", "overrides", "reason"]
    assert lines[1].split() == ["0", "completed", "1m01s", "workers=0"]
    assert lines[2].split() == ["1", "failed", "3s", "workers=1", "ValueError:", "boom"]


def test_index_roundtrip_and_done_needs_the_folder_to_agree(tmp_path: Path) -> None:
    index = SweepIndex(tmp_path)
    index.cells["a"] = CellRecord("a", ["workers=0"], "0", 0, status="completed", return_value=1.5)
    index.cells["b"] = CellRecord("b", ["workers=1"], "1", 1, status="failed")
    index.save()
    again = SweepIndex.load(tmp_path)
    assert again.cells["a"].return_value == 1.5 and again.cells["b"].status == "failed"
    assert again.subdir_owner("1") == "b" and again.subdir_owner("9") is None
    assert not again.is_done("a")  # no summary.json: not trusted
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / SUMMARY_FILE).write_text(json.dumps({"status": "completed"}))
    assert again.is_done("a") and not again.is_done("b") and not again.is_done("zz")
    assert jsonable_return(float("nan")) is None and jsonable_return(3) == 3
    assert jsonable_return({"a": 1}) == "{'a': 1}"


# ------------------------------ the sweep engine in-process, Tune part faked


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_cells_are_grouped_by_how_ray_starts(tmp_path: Path, fake_groups) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    fake = fake_groups()
    rets = multirun(
        tmp_path, "workers=0,1", "cpu_affinity=unrestricted,ray_cpus,pinned", "gpu_layout=none"
    )
    assert [r.overrides for r in rets] == [
        [f"workers={w}", f"cpu_affinity={a}", "gpu_layout=none"]
        for w in (0, 1)
        for a in ("unrestricted", "ray_cpus", "pinned")
    ]
    starts = [g[0] for g in fake.groups]
    # unrestricted (both cells), ray_cpus with 1 and 2 CPUs, pinned to {0} and {0, 1}
    assert starts == [
        RayStart((), None, None),
        RayStart((), 1, None),
        RayStart((), 1, (0,)),
        RayStart((), 2, None),
        RayStart((), 2, (0, 1)),
    ]
    assert len(fake.groups[0][1]) == 2
    assert [r.return_value for r in rets] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert len(index["groups"]) == 5 and len(index["cells"]) == 6
    assert index["groups"][4]["ray_start"] == {
        "visible_gpus": [],
        "num_cpus": 2,
        "affinity": [0, 1],
    }
    assert index["groups"][0]["capacity"]["CPU"] == len(os.sched_getaffinity(0))


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_resume_keeps_completed_cells_by_hash(tmp_path: Path, fake_groups) -> None:
    fake = fake_groups()
    first = multirun(tmp_path, "seed=0,1", "workers=0")
    hashes = {json.loads((tmp_path / d / CELL_FILE).read_text())["hash"]: d for d in ("0", "1")}
    assert len(fake.groups) == 1 and [r.return_value for r in first] == [0.0, 1.0]
    # Reordered and extended: seed=2 is new; Hydra numbers it 0, a folder already taken.
    fake = fake_groups()
    second = multirun(tmp_path, "seed=2,0,1", "workers=0")
    assert [c for _, cells in fake.groups for c in cells] == [["seed=2", "workers=0"]]
    assert [r.overrides[0] for r in second] == ["seed=2", "seed=0", "seed=1"]
    assert [r.return_value for r in second] == [0.0, 0.0, 1.0]  # kept cells: their old value
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    by_seed = {r["overrides"][0]: r for r in index["cells"].values()}
    assert by_seed["seed=0"]["subdir"] == "0"  # kept where it was
    assert by_seed["seed=1"]["runs"] == 1  # not run again
    new = by_seed["seed=2"]
    assert new["subdir"] == f"0-{new['hash'][:8]}" and new["status"] == "completed"
    assert set(hashes) < set(index["cells"])
    assert json.loads((tmp_path / new["subdir"] / CELL_FILE).read_text())["job_num"] == 0


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_resume_never_keeps_a_cell_whose_resolved_config_changed(
    tmp_path: Path, fake_groups
) -> None:
    """Same command line, same folder, but a preset it uses changed in between: the cells
    are different experiments and run again; an unchanged preset keeps them."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    preset = conf / "experiment" / "mine.yaml"
    preset.write_text("# @package _global_\ntrain:\n  iterations: 7\n")
    sweep = tmp_path / "sweep"
    args = (f"hydra.searchpath=[file://{conf}]", "experiment=mine", "seed=0,1", "workers=0")
    fake = fake_groups()
    multirun(sweep, *args)
    assert len([c for _, cells in fake.groups for c in cells]) == 2
    fake = fake_groups()
    multirun(sweep, *args)  # unchanged: both kept
    assert fake.groups == []
    preset.write_text("# @package _global_\ntrain:\n  iterations: 8\n")  # not on the command line
    fake = fake_groups()
    multirun(sweep, *args)
    assert [c for _, cells in fake.groups for c in cells] == [
        ["experiment=mine", "seed=0", "workers=0"],
        ["experiment=mine", "seed=1", "workers=0"],
    ]
    records = json.loads((sweep / INDEX_FILE).read_text())["cells"].values()
    # The old cells' records stay under their own hashes; the new cells got new folders.
    assert len(records) == 4 and len({r["subdir"] for r in records}) == 4


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_failed_and_invalid_cells_fail_the_sweep_after_the_others(
    tmp_path: Path, fake_groups
) -> None:
    fake = fake_groups(fail=("workers=1",))
    with pytest.raises(SweepIncomplete, match="3 cells: 3 invalid") as invalid:
        multirun(tmp_path, "workers=0,1,2", "model=tiny", "model.dim=100")
    assert invalid.value.exit_code == 2  # invalid cells only: a user error (docs/exit-codes.md)
    # model.dim=100 cannot reach 1x1 with the tiny model: invalid before anything runs.
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert {tuple(r["overrides"])[0]: r["status"] for r in index["cells"].values()} == {
        "workers=0": "invalid",
        "workers=1": "invalid",
        "workers=2": "invalid",
    }
    assert fake.groups == []
    summary = json.loads((tmp_path / "0" / SUMMARY_FILE).read_text())
    assert summary["status"] == "invalid" and summary["preflight"] is True
    assert "ConfigError" in summary["error"] and "1x1" in summary["error"]
    assert (tmp_path / "0" / ".hydra" / "overrides.yaml").is_file()

    other = tmp_path / "other"
    fake = fake_groups(fail=("seed=1",))
    with pytest.raises(SweepIncomplete, match="3 cells: 1 failed") as failed:
        multirun(other, "seed=0,1,2", "workers=0")
    assert failed.value.exit_code == 1
    # The failed cell did not stop the one after it.
    assert [c for _, cells in fake.groups for c in cells] == [
        ["seed=0", "workers=0"],
        ["seed=1", "workers=0"],
        ["seed=2", "workers=0"],
    ]
    statuses = [json.loads((other / d / CELL_FILE).read_text())["status"] for d in "012"]
    assert statuses == ["completed", "failed", "completed"]
    # The same command again runs the failed cell only; the completed ones are kept.
    fake = fake_groups()
    multirun(other, "seed=0,1,2", "workers=0")
    assert [c for _, cells in fake.groups for c in cells] == [["seed=1", "workers=0"]]
    again = [json.loads((other / d / CELL_FILE).read_text()) for d in "012"]
    assert [(c["status"], c["runs"]) for c in again] == [
        ("completed", 1),
        ("completed", 2),
        ("completed", 1),
    ]


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_infeasible_cells_are_skipped_or_fail_strictly(tmp_path: Path, fake_groups) -> None:
    from rlperf.errors import SweepError
    from rlperf.resources.plan import count_nvidia_gpus

    if count_nvidia_gpus()[0] > 0:
        pytest.skip("this machine has a GPU: gpu0_driver is feasible here")
    fake = fake_groups()
    rets = multirun(tmp_path, "gpu_layout=none,gpu0_driver", "workers=0")
    assert [r.return_value for r in rets] == [0.0, None]  # skipped is not a failure
    skipped = json.loads((tmp_path / "1" / SUMMARY_FILE).read_text())
    assert skipped["status"] == "skipped" and "GPU(s) [0]" in skipped["error"]
    assert skipped["preflight"] is True
    assert (tmp_path / "1" / ".hydra" / "config.yaml").is_file()
    assert [c for _, cells in fake.groups for c in cells] == [["gpu_layout=none", "workers=0"]]

    fake = fake_groups()
    with pytest.raises(SweepError, match="strict=true.*\n.*gpu0_driver"):
        multirun(
            tmp_path / "strict",
            "gpu_layout=none,gpu0_driver",
            "workers=0",
            "hydra.launcher.strict=true",
        )
    assert fake.groups == []  # nothing ran


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_existing_cluster_refuses_affinity_before_running(tmp_path: Path, fake_groups) -> None:
    from rlperf.errors import SweepError

    fake = fake_groups()
    with pytest.raises(SweepError, match="existing cluster cannot honour.*\n.*pinned"):
        multirun(
            tmp_path,
            "cpu_affinity=unrestricted,pinned",
            "workers=0",
            "ray.address=127.0.0.1:1",  # never contacted: refused first
        )
    assert fake.groups == []


# ---------------------------------- Hydra's launcher test suite (one Ray for all)


@pytest.fixture(scope="module")
def shared_ray() -> Iterator[str]:
    """A Ray in this process: the launcher runs the suites' cells in it (the "existing Ray"
    path; the integration suite's apps join its address), so each suite costs one Ray
    start instead of one per test."""
    import ray

    ray.init(
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.usefixtures("shared_ray")
@pytest.mark.parametrize(("launcher_name", "overrides"), [("rlperf_tune", [])])
class TestHydraLauncherSuite(LauncherTestSuite):
    """Hydra's LauncherTestSuite: plain Hydra apps, one CPU per cell."""

    @pytest.fixture(autouse=True)
    def _unspecified_version_base(self) -> Iterator[None]:
        """The suite's apps set no version_base (Hydra 1.1 behaviour: the job changes into
        its folder); tests composed before with version_base="1.3" must not leak it."""
        from hydra.core.singleton import Singleton
        from hydra.version import VersionBase

        saved = VersionBase.instance()
        # (VersionBase() would return the same singleton: drop it, Hydra makes a fresh one.)
        Singleton._instances.pop(VersionBase, None)  # type: ignore[attr-defined]
        try:
            yield
        finally:
            VersionBase.set_instance(saved)


@pytest.mark.slow
class TestHydraIntegrationSuite(IntegrationTestSuite):
    """Hydra's IntegrationTestSuite: each case runs a plain Hydra app as a subprocess with
    ``-m hydra/launcher=rlperf_tune``; its cells run on the module's one Ray."""

    @pytest.fixture
    def task_launcher_cfg(self, shared_ray: str) -> dict[str, Any]:
        # In the app's config file, not an override: it stays out of override_dirname.
        return {"ray": {"address": shared_ray}}

    @pytest.fixture
    def extra_flags(self) -> list[str]:
        return ["-m", "hydra/launcher=rlperf_tune"]
