"""GPU-fraction arithmetic (docs/study.md), feasibility checks, and how Ray is started."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rlperf.algos import plan_resources
from rlperf.errors import InfeasibleError
from rlperf.layout import SUMMARY_FILE
from rlperf.resources.plan import (
    Machine,
    check_feasible,
    floor_to_ray_unit,
    gpu_fractions,
    ray_cpu_count,
)
from rlperf.resources.ray_session import applied_placement, other_ray_address, ray_init_kwargs
from tests.conftest import RAY_START, TINY_TRAIN, run_rlperf

# The study's training matrix (docs/study.md):
# id -> (workers, layout, driver GPUs, GPUs per worker).
SPEC_TABLE = {
    "Exp1": (8, "none", None, 0, 0),
    "Exp2": (8, "gpu0", None, 0.0001, 0.1249875),
    "Exp3": (8, "gpu0_driver", None, 1, 0),
    "Exp4": (8, "gpu1", None, 0.0001, 0.1249875),
    "Exp5": (8, "gpu1_driver", None, 1, 0),
    "Exp6": (2, "both", None, 0.001, 0.9995),
    "Exp7": (4, "both", None, 0.001, 0.49975),
    "Exp8": (8, "both", None, 0.001, 0.249875),
    "Exp9": (8, "both_driver", None, 2, 0),
    "Exp10": (16, "both", 0.0001, 0.0001, 0.12499375),
}


@pytest.mark.parametrize("exp", sorted(SPEC_TABLE))
def test_gpu_fractions_reproduce_spec_table(compose_cfg, exp: str) -> None:
    workers, layout, driver_override, driver, per_worker = SPEC_TABLE[exp]
    overrides = [f"gpu_layout={layout}", f"workers={workers}"]
    if driver_override is not None:
        overrides.append(f"gpu_layout.driver_gpus={driver_override}")
    plan = plan_resources(compose_cfg(*overrides))
    assert plan.driver_gpus == pytest.approx(driver, rel=1e-12, abs=0)
    assert plan.gpus_per_worker == pytest.approx(per_worker, rel=1e-12, abs=0)
    # What Ray is asked for never exceeds the visible GPUs.
    assert plan.required_gpus <= len(plan.visible_gpus) + 1e-12


def test_driver_layout_with_two_gpus_uses_two_learners(compose_cfg) -> None:
    plan = plan_resources(compose_cfg("gpu_layout=both_driver", "workers=8"))
    assert (plan.num_learners, plan.gpus_per_learner, plan.gpus_per_worker) == (2, 1.0, 0.0)
    assert plan.cuda_visible_devices == "0,1"
    single = plan_resources(compose_cfg("gpu_layout=gpu1", "workers=8"))
    assert (single.num_learners, single.gpus_per_learner) == (0, 0.0001)
    assert single.cuda_visible_devices == "1"
    assert plan_resources(compose_cfg()).cuda_visible_devices == ""  # hides every GPU


def test_fractions_are_floored_to_rays_unit() -> None:
    assert floor_to_ray_unit(0.1249875) == pytest.approx(0.1249)
    assert floor_to_ray_unit(0.9995) == pytest.approx(0.9995)
    assert floor_to_ray_unit(0.5) == pytest.approx(0.5)
    assert 8 * floor_to_ray_unit(0.1249875) + 0.0001 <= 1.0
    assert gpu_fractions("shared", 1, 0.0001, 8)[1] * 8 + 0.0001 == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("mode", "workers", "expected_cpus", "expected_mask"),
    [("unrestricted", 8, None, None), ("ray_cpus", 8, 9, None), ("pinned", 8, 9, tuple(range(9)))],
)
def test_cpu_affinity_plan(compose_cfg, mode, workers, expected_cpus, expected_mask) -> None:
    plan = plan_resources(compose_cfg(f"cpu_affinity={mode}", f"workers={workers}"))
    assert plan.ray_num_cpus == expected_cpus
    assert plan.affinity == expected_mask
    assert plan.required_cpus == workers + 1


SMALL = Machine(cpus=(0, 1), gpus=0, gpu_source="test")


def test_missing_gpu_fails_fast_saying_what_exists(compose_cfg) -> None:
    plan = plan_resources(compose_cfg("gpu_layout=gpu1", "workers=1"))
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, SMALL, overcommit_cpus=True)
    assert "asks for GPU(s) [1] but this machine has 0 NVIDIA GPU(s)" in str(err.value)
    check_feasible(plan, Machine(cpus=(0, 1), gpus=2, gpu_source="test"), overcommit_cpus=True)


def test_too_many_workers_fail_unless_overcommitted(compose_cfg) -> None:
    plan = plan_resources(compose_cfg("workers=4"))
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, SMALL, overcommit_cpus=False)
    msg = str(err.value)
    assert "workers=4 needs 5 CPU bundles" in msg and "Ray will have 2 CPUs" in msg
    assert "ray.overcommit_cpus=true" in msg
    check_feasible(plan, SMALL, overcommit_cpus=True)
    assert ray_cpu_count(plan, SMALL, overcommit_cpus=True) == 5
    assert ray_cpu_count(plan, SMALL, overcommit_cpus=False) == 2


def test_pinned_mask_beyond_the_machine_is_refused(compose_cfg) -> None:
    plan = plan_resources(compose_cfg("cpu_affinity=pinned", "workers=8"))
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, SMALL, overcommit_cpus=True)
    assert "CPUs 0-8" in str(err.value) and "CPUs 2-8 do not exist here" in str(err.value)


def test_ray_is_started_on_loopback_without_dashboard(compose_cfg) -> None:
    cfg = compose_cfg("workers=1", "cpu_affinity=ray_cpus")
    plan = plan_resources(cfg)
    kwargs = ray_init_kwargs(cfg.ray, ray_cpu_count(plan, SMALL, False), plan.num_gpus)
    assert kwargs["include_dashboard"] is False
    assert kwargs["dashboard_host"] == "127.0.0.1" and kwargs["_node_ip_address"] == "127.0.0.1"
    assert (kwargs["num_cpus"], kwargs["num_gpus"]) == (2, 0)
    big = compose_cfg("ray.object_store_memory_mb=100")
    assert ray_init_kwargs(big.ray)["object_store_memory"] == 100 * 2**20
    assert "num_cpus" not in ray_init_kwargs(big.ray)  # Ray detects them
    joined = ray_init_kwargs(compose_cfg("ray.address=127.0.0.1:6379").ray, 4, 1)
    assert joined["address"] == "127.0.0.1:6379" and "num_cpus" not in joined
    # A local start is always a fresh Ray of rlperf's own, whatever RAY_ADDRESS says.
    assert kwargs["address"] == "local"
    assert ray_init_kwargs(compose_cfg("ray.address=auto").ray)["address"] == "auto"


def test_the_ray_a_plain_init_would_join_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # Ray's files here, no other Ray's
    assert other_ray_address() is None  # nothing here (the suite clears RAY_ADDRESS)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert other_ray_address() == "RAY_ADDRESS=127.0.0.1:1"
    # The address file a `ray start --head` leaves (Ray's own path for it), stale here.
    from ray._private.utils import get_ray_address_file

    monkeypatch.delenv("RAY_ADDRESS")
    address_file = Path(get_ray_address_file(None))
    assert address_file.parent == tmp_path / "ray"
    address_file.parent.mkdir(parents=True, exist_ok=True)
    address_file.write_text("127.0.0.1:1")
    assert other_ray_address() == "the Ray at 127.0.0.1:1 (the address file of a `ray start`)"


@pytest.mark.slow
def test_a_run_beside_another_rays_address_starts_its_own(tmp_path: Path) -> None:
    """RAY_ADDRESS at a dead port (as a leftover of a Ray job would leave it): the run
    starts its own Ray, says once that it did not join, and completes."""
    proc = run_rlperf(
        [*TINY_TRAIN, "train.iterations=1", f"hydra.run.dir={tmp_path / 'run'}"],
        tmp_path,
        env={"RAY_ADDRESS": "127.0.0.1:1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("not joining RAY_ADDRESS=127.0.0.1:1") == 1, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 1


def test_placement_is_applied_and_restored(compose_cfg) -> None:
    before_mask = os.sched_getaffinity(0)
    before_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    plan = plan_resources(compose_cfg("cpu_affinity=pinned", "workers=0", "gpu_layout=none"))
    before_order = os.environ.get("CUDA_DEVICE_ORDER")
    with applied_placement(plan):
        assert os.sched_getaffinity(0) == {0}
        assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # indices mean NVML's
    assert os.environ.get("CUDA_DEVICE_ORDER") == before_order
    assert os.sched_getaffinity(0) == before_mask
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before_cuda


@pytest.mark.slow
def test_ray_packs_the_study_fractions_on_one_gpu() -> None:
    """The study's shared layout fits one logical GPU; 8 x 0.125 + 0.0001 would not."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    ray.init(
        num_cpus=2,
        num_gpus=1,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        exact = 0.1249875
        floored = floor_to_ray_unit(exact)
        ok = placement_group([{"GPU": 0.0001}] + [{"GPU": floored}] * 8)
        assert ok.wait(timeout_seconds=30)
        remove_placement_group(ok)
        also = placement_group([{"GPU": 0.0001}] + [{"GPU": exact}] * 8)
        assert also.wait(timeout_seconds=30)
        remove_placement_group(also)
        bad = placement_group([{"GPU": 0.0001}] + [{"GPU": 0.125}] * 8)
        ready = bad.wait(timeout_seconds=3)
        remove_placement_group(bad)
        assert not ready
    finally:
        ray.shutdown()


@pytest.mark.slow
@RAY_START
def test_a_run_beside_a_live_ray_start_neither_joins_nor_disturbs_it(
    tmp_path: Path, ray_tmp: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `ray start --head` on the machine (its address file written, as on a cluster
    node): the run starts its own Ray, and the other Ray still answers afterwards. (The
    head keeps its files in a private temp folder, RAY_TMPDIR, where the run looks too;
    the ray_tmp fixture stops exactly its processes.)"""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    env = dict(os.environ, RAY_ENABLE_UV_RUN_RUNTIME_ENV="0")
    started = subprocess.run(
        [ray_bin, "start", "--head", "--port=0", "--num-cpus=1", "--num-gpus=0",
         "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr[-2000:]
    other = other_ray_address()
    assert other is not None and "address file" in other
    address = other.split("the Ray at ")[1].split(" ")[0]
    proc = run_rlperf(
        [*TINY_TRAIN, "train.iterations=1", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"not joining the Ray at {address}" in proc.stderr
    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    assert summary["status"] == "completed"
    # The other Ray is still there: its address file unchanged, its GCS still listening.
    assert other_ray_address() == other
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5):
        pass
