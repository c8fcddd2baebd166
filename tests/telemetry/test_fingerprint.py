"""Tests of the run fingerprint (fingerprint.json)."""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import psutil
import pytest
from fakes.pynvml import FakeGpu, FakePynvml, NVMLError_DriverNotLoaded
from omegaconf import OmegaConf

from rlperf.layout import FINGERPRINT_FILE
from rlperf.telemetry.fingerprint import (
    FINGERPRINT_LIBRARIES,
    cgroup_cpu_limit,
    collect_fingerprint,
    compact_ranges,
    cpu_model,
    detect_edgetpu,
    git_revision,
    library_versions,
    parse_cpu_model,
    to_jsonable,
    write_fingerprint,
)
from rlperf.telemetry.nvml import NvmlSession
from tests.conftest import REPO

NO_GPU = FakePynvml(init_error=NVMLError_DriverNotLoaded)


def git(cwd: Path, *args: str) -> str:
    """Run git with a throwaway identity; return stdout."""
    return subprocess.run(
        [
            "git",
            "-c",
            "user.name=rlperf-test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


# ------------------------------------------------------------------------ pieces


@pytest.mark.parametrize(
    ("cpus", "expected"),
    [
        ([0, 1, 2, 3, 4, 5, 6, 7, 8, 12], "0-8,12"),
        ([12, 0, 3, 1, 2], "0-3,12"),
        ([5], "5"),
        ([1, 3, 4], "1,3-4"),
        ([], ""),
    ],
)
def test_compact_ranges(cpus: list[int], expected: str) -> None:
    assert compact_ranges(cpus) == expected


def test_parse_cpu_model_x86_and_arm() -> None:
    x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 158\n"
    x86 += "model name\t: Intel(R) Core(TM) i9-9900K CPU @ 3.60GHz\n"
    assert parse_cpu_model(x86) == "Intel(R) Core(TM) i9-9900K CPU @ 3.60GHz"
    arm = "processor\t: 0\nBogoMIPS\t: 108.00\n\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
    assert parse_cpu_model(arm) == "Raspberry Pi 4 Model B Rev 1.4"
    assert parse_cpu_model("processor\t: 0\n") is None


def test_cpu_model_reads_proc_cpuinfo(tmp_path: Path) -> None:
    real = Path("/proc/cpuinfo")
    if real.exists():
        expected = parse_cpu_model(real.read_text())
        if expected:
            assert cpu_model() == expected
    fallback = cpu_model(tmp_path / "missing")
    assert fallback == (platform.processor() or platform.machine())


def test_cgroup_cpu_limit(tmp_path: Path) -> None:
    f = tmp_path / "cpu.max"
    f.write_text("200000 100000\n")
    assert cgroup_cpu_limit(f) == 2.0
    f.write_text("max 100000\n")
    assert cgroup_cpu_limit(f) is None
    assert cgroup_cpu_limit(tmp_path / "absent") is None


def test_detect_edgetpu_pcie_usb_and_absent(tmp_path: Path) -> None:
    dev, usb = tmp_path / "dev", tmp_path / "usb"
    dev.mkdir()
    usb.mkdir()
    absent = detect_edgetpu(dev, usb)
    assert absent["present"] is False
    assert "apex_*" in absent["reason"] and "1a6e:089a" in absent["reason"]

    def usb_device(name: str, vendor: str, product: str) -> None:
        (usb / name).mkdir()
        (usb / name / "idVendor").write_text(vendor + "\n")
        (usb / name / "idProduct").write_text(product + "\n")

    usb_device("1-1", "18d1", "4ee7")  # a Google Android phone, not a Coral
    (usb / "1-1:1.0").mkdir()  # an interface folder without ids
    assert detect_edgetpu(dev, usb)["present"] is False
    usb_device("2-1", "1a6e", "089a")  # Coral USB before firmware load
    found = detect_edgetpu(dev, usb)
    assert found["present"] is True
    assert "USB Edge TPU" in found["reason"] and "1a6e:089a" in found["reason"]

    (dev / "apex_0").touch()
    pcie = detect_edgetpu(dev, usb)
    assert pcie["present"] is True and "apex_0" in pcie["reason"]


def test_library_versions_match_package_metadata() -> None:
    versions = library_versions()
    assert list(versions) == list(FINGERPRINT_LIBRARIES)
    for name in ("ray", "torch", "tensorflow", "gymnasium", "ale-py", "hydra-core"):
        assert name in versions
    for name, version in versions.items():
        try:
            assert version == metadata.version(name)
        except metadata.PackageNotFoundError:
            assert version is None
    assert library_versions(["surely-not-installed-rlperf-xyz"]) == {
        "surely-not-installed-rlperf-xyz": None
    }


def test_git_revision_of_a_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    (repo / "rlperf").mkdir(parents=True)
    tracked = repo / "rlperf" / "x.py"
    tracked.write_text("a = 1\n")
    git(repo, "init", "-q")
    assert git_revision(repo) == (None, None)  # no commit yet
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    head = git(repo, "rev-parse", "HEAD")
    assert git_revision(repo) == (head, False)
    (repo / "untracked.txt").write_text("ignored for dirtiness\n")
    assert git_revision(repo) == (head, False)
    tracked.write_text("a = 2\n")
    assert git_revision(repo) == (head, True)
    # A folder inside a checkout that is not its top (e.g. a venv's site-packages
    # holding an installed wheel) is not "the rlperf checkout".
    assert git_revision(repo / "rlperf") == (None, None)
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    assert git_revision(plain) == (None, None)


def test_to_jsonable_resolves_omegaconf_and_plain_values() -> None:
    cfg = OmegaConf.create({"workers": 8, "train": {"iters": "${workers}"}, "l": [1, 2]})
    assert to_jsonable(cfg) == {"workers": 8, "train": {"iters": 8}, "l": [1, 2]}
    value = {"p": Path("/x"), "t": (1, 2.5), "nan": math.nan, 3: None, "b": True}
    assert to_jsonable(value) == {"p": "/x", "t": [1, 2.5], "nan": None, "3": None, "b": True}


# ---------------------------------------------------------------------- assembly


def test_fingerprint_machine_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    before = datetime.now(UTC)
    fp = collect_fingerprint({"model": "model1"}, pynvml_module=NO_GPU)
    after = datetime.now(UTC)

    assert fp["affinity"] == sorted(os.sched_getaffinity(0))
    assert fp["affinity_str"] == compact_ranges(os.sched_getaffinity(0))
    assert fp["cpu_count_logical"] == psutil.cpu_count(logical=True) == os.cpu_count()
    assert fp["cpu_count_physical"] == psutil.cpu_count(logical=False)
    assert fp["ram_total_mb"] == psutil.virtual_memory().total / 2**20
    assert fp["cpu_model"] == cpu_model()
    assert fp["hostname"] == socket.gethostname()
    assert fp["python"] == platform.python_version()
    assert fp["platform"] == platform.platform()
    assert fp["cuda_visible_devices"] == "1,0"
    assert fp["config"] == {"model": "model1"}
    assert fp["libraries"] == library_versions()
    assert fp["edgetpu"] == detect_edgetpu()
    start = datetime.fromisoformat(fp["start_time"])
    offset = start.utcoffset()
    assert offset is not None and offset.total_seconds() == 0
    assert before <= start <= after
    assert (fp["rlperf_git_commit"], fp["rlperf_git_dirty"]) == git_revision(REPO)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert collect_fingerprint(pynvml_module=NO_GPU)["cuda_visible_devices"] is None


def test_fingerprint_git_commit_of_this_checkout() -> None:
    fp = collect_fingerprint(pynvml_module=NO_GPU)
    try:
        head = git(REPO, "rev-parse", "HEAD")
    except subprocess.CalledProcessError:
        head = None  # not a checkout, or no commit yet
    assert fp["rlperf_git_commit"] == head
    if head is not None:
        status = git(REPO, "status", "--porcelain", "--untracked-files=no")
        assert fp["rlperf_git_dirty"] is bool(status)


def test_fingerprint_json_round_trip(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"a": 1, "b": "${a}", "nested": {"x": [1.5, None]}})
    fp = collect_fingerprint(cfg, pynvml_module=FakePynvml([FakeGpu()]))
    text = json.dumps(fp, allow_nan=False)  # strict JSON: no NaN, no objects
    assert json.loads(text) == fp
    assert fp["config"] == {"a": 1, "b": 1, "nested": {"x": [1.5, None]}}
    path = write_fingerprint(tmp_path / "job" / FINGERPRINT_FILE, fp)
    assert path == tmp_path / "job" / FINGERPRINT_FILE
    assert json.loads(path.read_text()) == fp
    assert sorted(p.name for p in path.parent.iterdir()) == [FINGERPRINT_FILE]


def test_fingerprint_gpus_from_nvml() -> None:
    fake = FakePynvml(
        [
            FakeGpu(name="NVIDIA GeForce RTX 3090", uuid="GPU-a", memory_total_mb=24576.0),
            FakeGpu(name="NVIDIA TITAN V", uuid="GPU-b", memory_total_mb=12288.0),
        ],
        driver_version="550.54.15",
    )
    with NvmlSession(fake) as nvml:
        fp = collect_fingerprint(nvml=nvml)
        assert nvml.is_open  # the caller's session is left open
    assert fp["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA GeForce RTX 3090",
            "memory_total_mb": 24576.0,
            "uuid": "GPU-a",
        },
        {"index": 1, "name": "NVIDIA TITAN V", "memory_total_mb": 12288.0, "uuid": "GPU-b"},
    ]
    assert fp["gpu_driver"] == "550.54.15"
    assert fp["nvml_unavailable_reason"] is None

    owned = FakePynvml([FakeGpu()])
    assert len(collect_fingerprint(pynvml_module=owned)["gpus"]) == 1
    assert owned.init_count == owned.shutdown_count == 1  # opened and closed here


def test_fingerprint_without_nvml_reports_no_gpus_with_reason() -> None:
    fp = collect_fingerprint(pynvml_module=FakePynvml(init_error=NVMLError_DriverNotLoaded))
    assert fp["gpus"] == []
    assert fp["gpu_driver"] is None
    assert "Driver Not Loaded" in fp["nvml_unavailable_reason"]
    empty = collect_fingerprint(pynvml_module=FakePynvml([]))
    assert empty["gpus"] == [] and "no GPU" in empty["nvml_unavailable_reason"]


def test_fingerprint_reports_a_changed_affinity_mask() -> None:
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("os.sched_setaffinity is Linux-only")
    cpu = min(os.sched_getaffinity(0))
    code = (
        "import json, os\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "from fakes.pynvml import FakePynvml, NVMLError_DriverNotLoaded\n"
        "from rlperf.telemetry.fingerprint import collect_fingerprint\n"
        "fp = collect_fingerprint(pynvml_module=FakePynvml(init_error=NVMLError_DriverNotLoaded))\n"
        "print(json.dumps([fp['affinity'], fp['affinity_str'], fp['cpu_count_logical']]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    affinity, affinity_str, logical = json.loads(out.stdout)
    assert affinity == [cpu]
    assert affinity_str == str(cpu)
    assert logical == os.cpu_count()  # the machine's count does not change with the mask
