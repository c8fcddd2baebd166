"""The resource plan's arithmetic at its boundaries, on machines given as values (not this
machine's size): CPU bundles against Ray's CPUs, learner splits, serve replicas, the
plan's JSON (found by mutation testing, docs/development.md#mutation-testing)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.pynvml import FakeGpu, FakePynvml, NVMLError_DriverNotLoaded
from omegaconf import OmegaConf

from rlperf.errors import InfeasibleError
from rlperf.resources import plan as plan_module
from rlperf.resources.plan import (
    Machine,
    ResourcePlan,
    check_feasible,
    check_serve_feasible,
    floor_to_ray_unit,
    gpu_fractions,
    learner_split,
    ray_cpu_count,
    resource_plan,
    serve_replica_cpus,
)


def _machine(cpus: int, gpus: int = 0) -> Machine:
    return Machine(cpus=tuple(range(cpus)), gpus=gpus, gpu_source="given")


def _cfg(workers: int = 2, **over: Any) -> Any:
    cfg = {
        "workers": workers,
        "learners": None,
        "gpu_layout": {"mode": "none", "visible_gpus": [], "driver_gpus": 0.0},
        "cpu_affinity": {"mode": "unrestricted", "num_cpus": None, "first_cpu": 0},
        "env_runner": {"num_cpus": 1, "num_envs": 1},
        "env": {"kind": "atari", "engine": "python", "threads": None},
    }
    for key, value in over.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    return OmegaConf.create(cfg)


def test_gpu_fractions_by_mode() -> None:
    assert gpu_fractions("none", 2, 0.5, 4) == (0.0, 0.0)
    assert gpu_fractions("shared", 0, 0.5, 4) == (0.0, 0.0)
    assert gpu_fractions("driver", 2, 0.5, 4) == (2.0, 0.0)
    assert gpu_fractions("shared", 2, 0.5, 0) == (0.5, 0.0)
    assert gpu_fractions("shared", 2, 0.5, 3) == (0.5, 0.5)
    with pytest.raises(ValueError, match="gpu_layout.mode='half': expected none, shared"):
        gpu_fractions("half", 1, 0.5, 1)


def test_learner_split() -> None:
    assert learner_split(0.0, None, 0) == (0, 0.0)
    assert learner_split(1.0, None, 1) == (1, 1.0)
    assert learner_split(0.5, None, 2) == (2, 0.25)
    assert learner_split(2.0, None, 0) == (2, 1.0)
    assert learner_split(0.5, 2, 0) == (2, 0.25)
    assert learner_split(0.5, 0, 1) == (0, 0.5)
    assert learner_split(2.0, 2, 0) == (2, 1.0)
    with pytest.raises(ValueError, match="driver_gpus=1.5: above 1 it must be whole GPUs"):
        learner_split(1.5, None, 0)
    with pytest.raises(ValueError) as err:
        learner_split(2.0, 3, 0)
    assert str(err.value) == (
        "learners=3 with a GPU layout that gives the learners 2 GPUs: RLlib gives each "
        "learner actor whole GPUs here, so use learners=2 (or null), or a layout with one "
        "GPU for the learner"
    )


def test_plan_of_a_config() -> None:
    plan = resource_plan(
        _cfg(
            workers=4,
            learners=2,
            gpu_layout={"mode": "shared", "visible_gpus": [1], "driver_gpus": 0.2},
            cpu_affinity={"mode": "pinned", "num_cpus": 3, "first_cpu": 2},
            env_runner={"num_cpus": 0.5, "num_envs": 3, "torch_threads": 2},
        ),
        default_learners=0,
    )
    assert plan.visible_gpus == (1,) and plan.cuda_visible_devices == "1"
    assert (plan.driver_gpus, plan.gpus_per_worker) == (0.2, pytest.approx(0.2))
    assert plan.gpus_per_worker_scheduled == pytest.approx(0.2)
    assert (plan.num_learners, plan.gpus_per_learner) == (2, 0.1)
    assert (plan.ray_num_cpus, plan.affinity) == (3, (2, 3, 4))
    assert (plan.cpus_per_env_runner, plan.envs_per_env_runner) == (0.5, 3)
    assert (plan.env_runner_torch_threads, plan.vectorize_mode) == (2, "sync")
    assert (plan.engine, plan.env_threads) == ("python", 1)
    # Learner actors with a GPU take no CPU: 1 (driver) + 4 x 0.5.
    assert plan.cpus_per_learner == 0.0 and plan.required_cpus == 3.0
    assert plan.required_gpus == pytest.approx(2 * 0.1 + 4 * 0.2)
    ray_cpus = resource_plan(_cfg(workers=5, cpu_affinity={"mode": "ray_cpus"}), 0)
    assert (ray_cpus.ray_num_cpus, ray_cpus.affinity) == (6, None)
    assert resource_plan(_cfg(), 1).env_runner_torch_threads is None


def test_plan_json_is_plain_values() -> None:
    plan = resource_plan(_cfg(workers=3, learners=1), default_learners=0)
    out = plan.to_json()
    assert out["visible_gpus"] == [] and out["affinity"] is None
    assert out["num_env_runners"] == 3 and out["num_learners"] == 1
    assert (out["num_gpus"], out["cpus_per_learner"], out["required_cpus"]) == (0, 1.0, 5.0)
    pinned = resource_plan(_cfg(workers=1, cpu_affinity={"mode": "pinned"}), 0).to_json()
    assert pinned["affinity"] == [0, 1]


def test_cpu_bundles_at_the_boundary_of_rays_cpus() -> None:
    # 1 driver + 3 env runners + 1 learner actor without a GPU = 5 bundles.
    plan = resource_plan(_cfg(workers=3, learners=1), default_learners=0)
    assert plan.required_cpus == 5.0
    check_feasible(plan, _machine(5), overcommit_cpus=False)
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, _machine(4), overcommit_cpus=False)
    assert str(err.value) == (
        "workers=3 learners=1 needs 5 CPU bundles (1 for the driver + 1 per env runner + 1 "
        "for 1 learner actor(s)) but Ray will have 4 CPUs (this machine). Lower workers or "
        "learners, or set ray.overcommit_cpus=true to let Ray schedule more bundles than "
        "cores (measurements then share cores)"
    )
    check_feasible(plan, _machine(4), overcommit_cpus=True)
    assert ray_cpu_count(plan, _machine(4), overcommit_cpus=True) == 5
    assert ray_cpu_count(plan, _machine(8), overcommit_cpus=True) == 8
    assert ray_cpu_count(plan, _machine(4), overcommit_cpus=False) == 4
    # ray_cpus: Ray's CPUs are the plan's, whatever the machine has.
    capped = resource_plan(_cfg(workers=3, cpu_affinity={"mode": "ray_cpus", "num_cpus": 4}), 0)
    check_feasible(capped, _machine(2), overcommit_cpus=False)
    assert ray_cpu_count(capped, _machine(64), overcommit_cpus=False) == 4
    over = resource_plan(_cfg(workers=4, cpu_affinity={"mode": "ray_cpus", "num_cpus": 4}), 0)
    with pytest.raises(InfeasibleError, match=r"needs 5 CPU bundles .* \(cpu_affinity.num_cpus\)"):
        check_feasible(over, _machine(64), overcommit_cpus=False)
    assert ray_cpu_count(over, _machine(2), overcommit_cpus=True) == 5
    # Fractional env runners: 1 + 3 x 0.5 = 2.5 bundles need 3 CPUs when overcommitting.
    half = resource_plan(_cfg(workers=3, env_runner={"num_cpus": 0.5}), 0)
    assert ray_cpu_count(half, _machine(1), overcommit_cpus=True) == 3
    with pytest.raises(InfeasibleError, match=r"^workers=3 needs 2.5 CPU bundles \(1 for the "
                       r"driver \+ 0.5 per env runner\) but Ray will have 2 CPUs"):  # fmt: skip
        check_feasible(half, _machine(2), overcommit_cpus=False)


def test_gpus_at_the_boundary_of_the_machine() -> None:
    plan = resource_plan(_cfg(gpu_layout={"mode": "driver", "visible_gpus": [0, 1]}), 0)
    check_feasible(plan, _machine(4, gpus=2), overcommit_cpus=False)
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, _machine(4, gpus=1), overcommit_cpus=False)
    assert str(err.value) == (
        "gpu_layout asks for GPU(s) [0, 1] but this machine has 1 NVIDIA GPU(s) (given); "
        "use gpu_layout=none or indices below 1"
    )
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, _machine(4, gpus=0), overcommit_cpus=True)
    assert str(err.value).endswith("use gpu_layout=none")


def test_a_pinned_mask_at_the_boundary_of_the_machine() -> None:
    plan = resource_plan(_cfg(workers=1, cpu_affinity={"mode": "pinned", "first_cpu": 2}), 0)
    assert plan.affinity == (2, 3)
    check_feasible(plan, _machine(4), overcommit_cpus=False)
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, _machine(3), overcommit_cpus=True)
    assert str(err.value) == (
        "cpu_affinity=pinned asks for CPUs 2-3 (workers + 1 = 2 CPUs) but this process may "
        "only use CPUs 0-2; CPUs 3 do not exist here. Lower workers or cpu_affinity.num_cpus, "
        "or use cpu_affinity=ray_cpus"
    )


def _serve(replicas: int, cpus: float, overcommit: bool = False) -> Any:
    return OmegaConf.create(
        {
            "serve": {"replicas": replicas, "cpus_per_replica": cpus},
            "ray": {"overcommit_cpus": overcommit},
        }  # fmt: skip
    )


def test_serve_replicas_fit_the_machine() -> None:
    assert serve_replica_cpus(_serve(3, 0.5)) == 1.5
    check_serve_feasible(_serve(4, 0.5), _machine(2))  # exactly the machine
    # Within the tolerance (1e-9) of the machine: fits; above it: refused.
    check_serve_feasible(_serve(1, 2 + 1e-9), _machine(2))
    with pytest.raises(InfeasibleError) as err:
        check_serve_feasible(_serve(5, 0.5), _machine(2))
    assert str(err.value) == (
        "serve.replicas=5 x serve.cpus_per_replica=0.5 asks Ray for 2.5 CPUs but this process "
        "may use 2 (CPUs 0-1). Lower serve.replicas or serve.cpus_per_replica, or set "
        "ray.overcommit_cpus=true (replicas then share cores)"
    )
    with pytest.raises(InfeasibleError):
        check_serve_feasible(_serve(1, 2 + 1e-6), _machine(2))
    check_serve_feasible(_serve(5, 0.5, overcommit=True), _machine(2))


def test_required_gpus_count_one_learner_in_the_driver() -> None:
    plan = ResourcePlan((0,), 0.5, 0.25, 0.25, 0, 0.5, 2, 1.0, 1, None, None)
    assert plan.required_gpus == pytest.approx(0.5 + 2 * 0.25)
    assert plan.required_cpus == 3.0 and plan.num_gpus == 1


def test_learner_actors_with_gpus_take_no_cpu_bundle() -> None:
    plan = resource_plan(
        _cfg(workers=4, learners=2, gpu_layout={"mode": "driver", "visible_gpus": [0, 1]}), 0
    )
    assert (plan.num_learners, plan.gpus_per_learner, plan.required_cpus) == (2, 1.0, 5.0)
    with pytest.raises(InfeasibleError) as err:
        check_feasible(plan, _machine(4, gpus=2), overcommit_cpus=False)
    assert str(err.value).startswith(
        "workers=4 learners=2 needs 5 CPU bundles (1 for the driver + 1 per env runner) but "
        "Ray will have 4 CPUs (this machine). Lower"
    )
    capped = resource_plan(_cfg(workers=4, cpu_affinity={"mode": "ray_cpus", "num_cpus": 4}), 0)
    with pytest.raises(InfeasibleError) as err:
        check_feasible(capped, _machine(64), overcommit_cpus=False)
    assert "Ray will have 4 CPUs (cpu_affinity.num_cpus). Lower workers" in str(err.value)


def test_gpus_counted_from_the_drivers_proc_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("0000:01:00.0", "0000:02:00.0"):
        (tmp_path / name).mkdir()
    (tmp_path / "README").write_text("not a GPU")
    asked: list[str] = []
    monkeypatch.setattr(plan_module, "Path", lambda p: asked.append(p) or tmp_path)
    assert plan_module.count_nvidia_gpus() == (2, str(tmp_path))
    assert asked == ["/proc/driver/nvidia/gpus"]


def test_gpus_counted_by_nvml_without_the_proc_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_module, "Path", lambda p: tmp_path / "absent")
    monkeypatch.setitem(sys.modules, "pynvml", FakePynvml([FakeGpu(), FakeGpu(), FakeGpu()]))
    assert plan_module.count_nvidia_gpus() == (3, "NVML")
    monkeypatch.setitem(sys.modules, "pynvml", FakePynvml(init_error=NVMLError_DriverNotLoaded))
    gpus, source = plan_module.count_nvidia_gpus()
    assert (gpus, source.startswith("no NVIDIA driver (NVMLError_DriverNotLoaded: ")) == (0, True)


def test_the_machine_is_this_process_affinity_and_gpu_count() -> None:
    machine = plan_module.detect_machine()
    assert machine.cpus == tuple(sorted(os.sched_getaffinity(0)))
    assert (machine.gpus, machine.gpu_source) == plan_module.count_nvidia_gpus()


def test_one_gpu_for_the_learner_side_is_the_algorithms_default_split() -> None:
    assert learner_split(1.0, None, 0) == (0, 1.0)  # PPO: the learner in the driver
    assert learner_split(1.0, 2, 0) == (2, 0.5)  # two learner actors share the GPU
    plan = resource_plan(_cfg(env={"engine": "gymnasium_async"}), 0)
    assert plan.vectorize_mode == "async"


def test_a_threaded_engines_threads_are_env_runner_cpus() -> None:
    """env.threads of ale_vector run inside each env runner: Ray counts them as its CPUs
    (at least env_runner.num_cpus), so the pre-flight refuses what the machine cannot hold."""
    plan = resource_plan(_cfg(workers=2, env={"engine": "ale_vector", "threads": 3}), 0)
    assert (plan.engine, plan.env_threads, plan.vectorize_mode) == (
        "ale_vector",
        3,
        "vector_entry_point",
    )
    assert plan.cpus_per_env_runner == 3.0 and plan.required_cpus == 1 + 2 * 3.0
    more = resource_plan(
        _cfg(env={"engine": "ale_vector", "threads": 2}, env_runner={"num_cpus": 4}), 0
    )
    assert more.cpus_per_env_runner == 4.0
    default = resource_plan(_cfg(env={"engine": "ale_vector", "threads": None}), 0)
    assert (default.env_threads, default.cpus_per_env_runner) == (1, 1.0)
    # A Python engine has no threads of its own: env_runner.num_cpus alone.
    assert resource_plan(_cfg(env={"engine": "python"}), 0).cpus_per_env_runner == 1.0
    with pytest.raises(
        InfeasibleError, match=r"7 CPU bundles .* 3 per env runner \(env.threads=3\)"
    ):
        check_feasible(plan, Machine(cpus=(0, 1), gpus=0, gpu_source="test"), False)


def test_fractions_are_floored_after_rounding_away_float_noise() -> None:
    # 0.12489999996 / 1e-4 is 1248.9999996: float noise below 1e-6 of a unit, not a unit less.
    assert floor_to_ray_unit(0.12489999996) == pytest.approx(0.1249, abs=1e-12)
    assert floor_to_ray_unit(0.124899) == pytest.approx(0.1248, abs=1e-12)


def test_the_machine_is_this_process_mask_not_another_process() -> None:
    mask = os.sched_getaffinity(0)
    first = min(mask)
    os.sched_setaffinity(0, {first})
    try:
        assert plan_module.detect_machine().cpus == (first,)
    finally:
        os.sched_setaffinity(0, mask)
