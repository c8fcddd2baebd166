"""The GPU check (``benchmarks/gpu_check.py``): its checks on recorded result folders, its
sequence, its run without a GPU, and the GPU paths without TensorFlow.

The recorded folders (``tests/data/gpu_check/``) come from ``tests/support/gpu_check_fixtures.py``
(the fake NVML through rlperf's own writers); ``python tests/support/gpu_check_fixtures.py``
rewrites them. Every negative case must fail exactly the checks it names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_TRAIN, group_options, run_rlperf
from support.gpu_check_fixtures import DATA, NEGATIVE, POSITIVE, case_of

from rlperf.gpu_check.checks import (
    MANIFEST_FILE,
    Check,
    check_results,
    failed,
    format_table,
    gpu_value_checks,
    learn_s,
    read_json,
    read_rows,
    training_checks,
)
from rlperf.gpu_check.cli import TABLE_FILE
from rlperf.gpu_check.sequence import (
    ONE_GPU_LAYOUTS,
    TWO_GPU_LAYOUTS,
    Step,
    run_sequence,
    sequence,
)
from rlperf.layout import INDEX_FILE, METRICS_FILE, SUMMARY_FILE, TELEMETRY_FILE
from rlperf.results.columns import TRAIN_COLUMNS
from rlperf.telemetry.sampler import gpu_columns, telemetry_columns

SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _by_name(checks: list[Check]) -> dict[str, Check]:
    names = [c.name for c in checks]
    assert len(names) == len(set(names)), "check names must be unique"
    return {c.name: c for c in checks}


def _training_folders(case: str) -> list[Path]:
    return sorted(p.parent for p in (DATA / case).rglob(METRICS_FILE))


# ------------------------------------------------------------------ recorded folders


@pytest.mark.parametrize("case", sorted(POSITIVE))
def test_recorded_gpu_runs_pass_every_check(case: str) -> None:
    checks = check_results(DATA / case)
    assert not failed(checks), format_table(failed(checks))
    assert all(c.passed for c in checks)
    by_name = _by_name(checks)
    # Every job is checked: exit status, and per training job learner, env runners, GPU columns.
    manifest = read_json(DATA / case / MANIFEST_FILE)
    assert manifest is not None
    for step in manifest["steps"]:
        assert f"{step['name']}: exit status" in by_name
    for name in (s["name"] for s in manifest["steps"] if s["kind"] == "train"):
        assert f"{name}: learner device" in by_name and f"{name}: env runner GPU share" in by_name
        if name != "train/none":
            assert f"{name}: learn phase vs CPU" in by_name


def test_one_gpu_run_checks_what_the_issue_asks() -> None:
    by_name = _by_name(check_results(DATA / "one_gpu"))
    assert by_name["train/none: learner device"].seen == "1 x cpu (driver)"
    assert by_name["train/gpu0_driver: learner device"].expected == "1 x cuda (driver, 1 GPU each)"
    # Shared layout: the learner keeps 1e-4 of the GPU, 2 env runners split the rest.
    assert by_name["train/gpu0: env runner GPU share"].seen == "2 x GPU 0.4999 on cuda"
    assert by_name["train/gpu0_driver: env runner GPU share"].seen == "2 x GPU 0 on cpu"
    assert by_name["train/none: metrics.csv GPU columns"].seen == "none"
    assert by_name["train/gpu0: learn phase vs CPU"].seen == "0.210 s (9.0x)"
    assert by_name["train/gpu0: telemetry.csv gpu0 energy"].passed
    assert by_name["rollout/cuda: policy device"].seen == "cuda:0"
    # The sweep: two cells through Tune, each asked for and got its fractions.
    assert by_name["sweep: cells"].seen == "0: completed, 1: completed"
    assert by_name["sweep/0: Tune request GPUs"].seen == "0.0001 + 0.9999"
    assert by_name["sweep/1: Tune request GPUs"].seen == "0.0001 + 0.4999 + 0.4999"
    assert by_name["sweep/1: env runner GPU share"].seen == "2 x GPU 0.4999 on cuda"


def test_two_gpu_run_covers_every_study_layout() -> None:
    by_name = _by_name(check_results(DATA / "two_gpus"))
    for layout in TWO_GPU_LAYOUTS:
        assert by_name[f"train/{layout}: status"].passed
    assert by_name["train/both_driver: learner device"].seen == (
        "2 x cuda:0 (remote actors, 1 GPU each)"
    )
    assert by_name["train/both: env runner GPU share"].seen == "2 x GPU 0.9995 on cuda"
    # Each layout's own GPUs are monitored: gpu1 alone, or both.
    assert "train/gpu1: metrics.csv gpu1" in by_name
    assert "train/gpu1: metrics.csv gpu0" not in by_name
    assert {"train/both: telemetry.csv gpu0", "train/both: telemetry.csv gpu1"} <= set(by_name)


def test_gpu_without_energy_counter_passes_with_nan_energy() -> None:
    by_name = _by_name(check_results(DATA / "no_energy"))
    for file in (METRICS_FILE, TELEMETRY_FILE):
        check = by_name[f"train/gpu0: {file} gpu0 energy"]
        assert check.passed and check.seen == "nan throughout: no energy counter"


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_recorded_faults_fail_exactly_their_checks(case: str) -> None:
    checks = check_results(DATA / case)
    assert {c.name for c in failed(checks)} == set(case_of(case).fails), format_table(checks)


def test_fault_rows_say_what_was_seen() -> None:
    util = _by_name(check_results(DATA / "util_130"))["train/gpu0: telemetry.csv gpu0"]
    assert "util_pct=130" in util.seen
    energy = _by_name(check_results(DATA / "energy_decreasing"))
    assert energy["train/gpu0_driver: telemetry.csv gpu0 energy"].seen.startswith("decreases at")
    assert "iteration 2: -" in energy["train/gpu0_driver: metrics.csv gpu0 energy"].seen
    power = _by_name(check_results(DATA / "power_unreadable"))["train/gpu0: metrics.csv gpu0"]
    assert "power_w=nan" in power.seen
    cpu = _by_name(check_results(DATA / "learner_on_cpu"))["train/gpu0_driver: learner device"]
    assert cpu.seen == "1 x cpu (driver)"


@pytest.mark.parametrize("case", sorted({**POSITIVE, **NEGATIVE}))
def test_recorded_files_have_the_canonical_columns(case: str) -> None:
    """The recorded folders follow the writers' columns (regenerate them if this fails)."""
    for folder in _training_folders(case):
        summary = read_json(folder / SUMMARY_FILE)
        assert summary is not None
        gpus = summary["resource_plan"]["visible_gpus"]
        with (folder / METRICS_FILE).open() as f:
            assert f.readline().strip().split(",") == [*TRAIN_COLUMNS, *gpu_columns(gpus)]
        with (folder / TELEMETRY_FILE).open() as f:
            assert f.readline().strip().split(",") == telemetry_columns(gpus)
        assert len(read_rows(folder / METRICS_FILE) or []) == 2


# ------------------------------------------------------------------- check functions


def test_energy_rules() -> None:
    header = ["time_s", *gpu_columns([0])]

    def rows(energy: list[float]) -> list[dict[str, float]]:
        base = {"gpu0_util_pct": 50.0, "gpu0_mem_util_pct": 9.0, "gpu0_mem_used_mb": 800.0}
        return [{**base, "gpu0_power_w": 90.0, "gpu0_energy_j": e} for e in energy]

    def energy_check(file: str, energy: list[float]) -> Check:
        return gpu_value_checks("x", file, rows(energy), header, [0])[1]

    nan = float("nan")
    assert energy_check(TELEMETRY_FILE, [1.0, 1.0, 5.0]).passed  # flat between samples is fine
    assert not energy_check(TELEMETRY_FILE, [1.0, 1.0, 1.0]).passed  # never grew
    assert not energy_check(TELEMETRY_FILE, [1.0, 5.0, 4.0]).passed
    assert not energy_check(TELEMETRY_FILE, [1.0, nan, 4.0]).passed  # counter lost mid-run
    assert energy_check(TELEMETRY_FILE, [nan, nan]).passed  # no counter at all
    assert energy_check(METRICS_FILE, [3.0, 2.0]).passed  # per iteration, not cumulative
    assert not energy_check(METRICS_FILE, [3.0, 0.0]).passed


def test_value_rules_and_missing_columns() -> None:
    header = gpu_columns([0])
    good = {"gpu0_util_pct": 0.0, "gpu0_mem_util_pct": 100.0, "gpu0_mem_used_mb": 1.0}
    good |= {"gpu0_power_w": 20.0, "gpu0_energy_j": 4.0}
    assert gpu_value_checks("x", METRICS_FILE, [good], header, [0])[0].passed
    for key, bad in [
        ("gpu0_mem_util_pct", 101.0),
        ("gpu0_mem_used_mb", 0.0),
        ("gpu0_power_w", 0.0),
    ]:
        (values, _) = gpu_value_checks("x", METRICS_FILE, [{**good, key: bad}], header, [0])
        assert not values.passed and key.removeprefix("gpu0_") in values.seen
    (missing,) = gpu_value_checks("x", METRICS_FILE, [good], header[:-1], [0])
    assert not missing.passed and "gpu0_energy_j" in missing.seen
    (none,) = gpu_value_checks("x", METRICS_FILE, [good], header, [])
    assert not none.passed  # GPU columns where no GPU was visible
    (absent,) = gpu_value_checks("x", METRICS_FILE, None, [], [0])
    assert absent.seen == "missing" and not absent.passed


def test_idle_gpu_memory_counts_only_outside_the_iterations() -> None:
    header = ["time_s", *gpu_columns([0])]
    base = {"gpu0_util_pct": 0.0, "gpu0_mem_util_pct": 0.0, "gpu0_power_w": 60.0}

    def values(mem: list[float], busy: list[tuple[float, float]]) -> Check:
        rows = [
            {**base, "time_s": float(t), "gpu0_mem_used_mb": m, "gpu0_energy_j": float(t)}
            for t, m in enumerate(mem)
        ]
        return gpu_value_checks("x", TELEMETRY_FILE, rows, header, [0], busy)[0]

    # 0 MiB before Ray starts (t=0) and after it stops (t=3) is an idle GPU, not a fault.
    assert values([0.0, 900.0, 950.0, 0.0], [(0.5, 2.5)]).passed
    during = values([0.0, 0.0, 950.0, 0.0], [(0.5, 2.5)])
    assert not during.passed and "row 2: mem_used_mb=0 while training" in during.seen
    assert not values([0.0, 0.0], []).passed  # never any memory in use
    assert values([0.0, 5.0], []).passed


def test_learn_phase_leaves_warmup_out() -> None:
    rows = [{"learn_s": 9.0, "warmup": 1.0}, {"learn_s": 0.2, "warmup": 0.0}]
    assert learn_s(rows) == 0.2
    assert learn_s([{"learn_s": 9.0, "warmup": 1.0}, {"learn_s": 3.0, "warmup": 1.0}]) == 3.0


def test_missing_files_fail_not_crash(tmp_path: Path) -> None:
    (only,) = check_results(tmp_path)
    assert not only.passed and MANIFEST_FILE in only.name
    status, *rest = training_checks("x", tmp_path)
    assert (status.seen, status.passed, rest) == ("no summary.json", False, [])
    shutil.copytree(DATA / "one_gpu", tmp_path / "run")
    (tmp_path / "run" / "sweep" / INDEX_FILE).unlink()
    shutil.rmtree(tmp_path / "run" / "train" / "gpu0")
    bad = {c.name for c in failed(check_results(tmp_path / "run"))}
    assert {"sweep: sweep.json", "train/gpu0: status", "train/gpu0: learn phase vs CPU"} <= bad


def test_table_has_one_aligned_row_per_check() -> None:
    checks = [
        Check("a", "1", "1", True),
        Check("long name", "x", "y", False),
        Check("c", "", "", None),
    ]
    lines = format_table(checks).splitlines()
    assert lines[0].split() == ["check", "expected", "seen", "result"]
    col = lines[0].index("result")
    assert [line[col:] for line in lines[1:]] == ["------", "pass", "FAIL", "skip"]
    assert lines[3].index("x") == lines[0].index("expected")


# -------------------------------------------------------------------------- sequence


def test_sequence_covers_the_layouts_the_machine_can_host(tmp_path: Path) -> None:
    one = sequence(1)
    assert [s.name for s in one] == [
        *(f"train/{layout}" for layout in ONE_GPU_LAYOUTS),
        "rollout/cuda",
        "sweep",
    ]
    assert set(TWO_GPU_LAYOUTS) == set(group_options("gpu_layout"))  # every study layout
    assert [s.name for s in sequence(2)][: len(TWO_GPU_LAYOUTS)] == [
        f"train/{layout}" for layout in TWO_GPU_LAYOUTS
    ]
    assert [s.name for s in sequence(4)] == [s.name for s in sequence(2)]
    train, rollout, sweep = one[1], one[3], one[4]
    assert train.args(tmp_path)[-1] == f"hydra.run.dir={tmp_path / 'train' / 'gpu0'}"
    assert "train.iterations=2" in train.args(tmp_path) and "model=model1" in train.args(tmp_path)
    assert f"run={tmp_path / 'train' / 'gpu0_driver'}" in rollout.args(tmp_path)
    assert "rollout.device=cuda" in rollout.args(tmp_path)
    args = sweep.args(tmp_path)
    assert args[0] == "-m" and "workers=1,2" in args and "gpu_layout=gpu0" in args
    assert args[-1] == f"hydra.sweep.dir={tmp_path / 'sweep'}"
    assert len(sweep.cells()) == 2
    with pytest.raises(ValueError, match="at least one GPU"):
        sequence(0)


def test_runner_records_every_job_and_its_exit(tmp_path: Path) -> None:
    """run_sequence runs `python -m rlperf`, logs each job and rewrites the manifest."""
    steps = [
        Step("train/none", "train", ("--cfg", "job", "gpu_layout=none")),
        Step("train/bad", "train", ("--cfg", "job", "gpu_layout=no_such_layout")),
    ]
    lines: list[str] = []
    manifest = run_sequence(steps, tmp_path, {"gpus": 0}, 120, lines.append)
    # A bad option is a user error: exit 2 (docs/exit-codes.md).
    assert [s["returncode"] for s in manifest["steps"]] == [0, 2]
    assert json.loads((tmp_path / MANIFEST_FILE).read_text())["steps"] == manifest["steps"]
    assert "name: none" in (tmp_path / manifest["steps"][0]["log"]).read_text()
    assert "no_such_layout" in (tmp_path / manifest["steps"][1]["log"]).read_text()
    assert lines[-1] == f"[2/2] train/bad: exit 2 in {manifest['steps'][1]['wall_s']} s"
    by_name = _by_name(check_results(tmp_path))
    assert by_name["train/none: exit status"].passed
    assert not by_name["train/bad: exit status"].passed


# ------------------------------------------------------------------------ the script


def test_gpu_check_imports_no_heavy_library() -> None:
    code = (
        "import sys, json, rlperf.gpu_check.cli\n"
        "print(json.dumps([m for m in ('ray', 'torch', 'tensorflow') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def _script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_script_without_gpu_checks_its_plumbing_and_exits_0(tmp_path: Path) -> None:
    proc = _script("--gpus", "0", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no NVIDIA GPU here" in proc.stderr
    rows = {line.split("  ")[0]: line.split()[-1] for line in proc.stdout.splitlines()[2:-1]}
    assert rows == {
        "NVIDIA GPUs": "skip",
        "sequence for 1 GPU": "pass",
        "sequence for 2 GPUs": "pass",
        "entry point: python -m rlperf --cfg job": "pass",
    }
    assert proc.stdout.splitlines()[-1] == "all checks passed"
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_script_on_a_machine_without_gpu(tmp_path: Path) -> None:
    from rlperf.resources.plan import count_nvidia_gpus

    found, source = count_nvidia_gpus()
    if found:
        pytest.skip(f"this machine has {found} NVIDIA GPU(s) ({source})")
    proc = _script(cwd=tmp_path)
    assert proc.returncode == 0 and "no NVIDIA GPU here" in proc.stderr
    assert not (tmp_path / "outputs").exists()


def test_script_dry_run_prints_the_commands(tmp_path: Path) -> None:
    proc = _script("--dry-run", "--gpus", "2", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == len(sequence(2))
    assert all(line.startswith(f"{sys.executable} -m rlperf ") for line in lines)
    assert "gpu_layout=both_driver" in lines[len(TWO_GPU_LAYOUTS) - 1]


@pytest.mark.parametrize(("case", "code"), [("one_gpu", 0), ("learner_on_cpu", 1)])
def test_script_checks_brought_back_results(tmp_path: Path, case: str, code: int) -> None:
    out = tmp_path / case
    shutil.copytree(DATA / case, out)
    proc = _script("--check-only", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert (out / TABLE_FILE).read_text().splitlines()[0].split() == [
        "check",
        "expected",
        "seen",
        "result",
    ]
    assert ("FAIL" in proc.stdout) == bool(code)


def test_script_check_only_without_results_fails_cleanly(tmp_path: Path) -> None:
    proc = _script("--check-only", "--out", str(tmp_path / "nothing"), cwd=tmp_path)
    assert proc.returncode == 1 and "gpu_check.json" in proc.stdout and not proc.stderr


# -------------------------------------------------------------- against a real run


@pytest.mark.slow
def test_a_real_cpu_run_passes_its_checks_and_matches_the_recorded_shape(tiny_run: Path) -> None:
    checks = training_checks("tiny", tiny_run)
    assert not failed(checks), format_table(checks)
    by_name = _by_name(checks)
    assert by_name["tiny: learner device"].seen == "1 x cpu (driver)"
    assert by_name["tiny: env runner GPU share"].seen == "1 x GPU 0 on cpu"
    real = read_json(tiny_run / SUMMARY_FILE)
    recorded = read_json(DATA / "one_gpu" / "train" / "gpu0" / SUMMARY_FILE)
    assert real is not None and recorded is not None
    assert set(real) == set(recorded)
    assert set(real["resource_plan"]) == set(recorded["resource_plan"])
    assert set(real["learner"]) == set(recorded["learner"])
    assert set(real["learner"]["learners"][0]) == set(recorded["learner"]["learners"][0])
    assert set(real["env_runners"]) == set(recorded["env_runners"])
    assert set(real["env_runners"]["runners"][0]) == set(recorded["env_runners"]["runners"][0])


#: What a GPU machine without TensorFlow lacks (and the edge stage's other libraries).
NO_TF = ("tensorflow", "tf_keras", "keras", "tensorflow_model_optimization", "ai_edge_litert")

_HIDE = f"""
# Written by tests/gpu_check/test_gpu_check.py: these packages look uninstalled in every process.
import importlib.machinery, sys

HIDDEN = {NO_TF!r}
_path_finder = importlib.machinery.PathFinder


class _Hidden:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return _path_finder.find_spec(name, path, target)

    @staticmethod
    def invalidate_caches():
        _path_finder.invalidate_caches()

    @staticmethod
    def find_distributions(*args, **kwargs):  # importlib.metadata asks the finders too
        return _path_finder.find_distributions(*args, **kwargs)


sys.meta_path[:] = [_Hidden if f is _path_finder else f for f in sys.meta_path]
"""


@pytest.mark.slow
def test_training_rollout_and_telemetry_run_without_tensorflow(tmp_path: Path) -> None:
    """A GPU machine's wheelhouse has no TensorFlow: train and roll out with it hidden.

    A ``sitecustomize`` on PYTHONPATH hides it from every process (the job, Ray's
    workers, the env runners), as if it were not installed.
    """
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(_HIDE)
    env = {"PYTHONPATH": os.pathsep.join([str(hide), str(REPO)])}
    probe = subprocess.run(
        [sys.executable, "-c", "import tensorflow"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    assert "No module named 'tensorflow'" in probe.stderr
    run, roll = tmp_path / "run", tmp_path / "rollout"
    jobs = [
        [*TINY_TRAIN, f"hydra.run.dir={run}"],
        ["stage=rollout", f"run={run}", "workers=0", "rollout.steps=60", "rollout.warmup_steps=10",
         f"hydra.run.dir={roll}"],
    ]  # fmt: skip
    for args in jobs:
        proc = run_rlperf(args, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for folder in (run, roll):
        summary = read_json(folder / SUMMARY_FILE)
        assert summary is not None and summary["status"] == "completed"
        assert len(read_rows(folder / TELEMETRY_FILE) or []) >= 1
    assert not failed(training_checks("no-tf", run))
