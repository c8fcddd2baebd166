"""scripts/wheelhouse.py: what it would carry to a GPU machine, and how (no network needed,
except the one resolution test, which skips without a package index)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

from scripts.wheelhouse import (
    EXCLUDED,
    FORBIDDEN,
    Wheel,
    canonical,
    gpu_requirements,
    parse_report,
    platform_tags,
    refuse_forbidden,
    requirement_name,
    resolve_command,
    strip_ray_jars,
    target_options,
)

PYPROJECT = REPO / "pyproject.toml"


def test_requirements_are_pyprojects_minus_torch_tensorflow_and_the_report() -> None:
    reqs = gpu_requirements(PYPROJECT)
    names = {requirement_name(r) for r in reqs}
    assert not names & {canonical(n) for n in EXCLUDED}
    assert {"ray", "gymnasium", "ale-py", "hydra-core", "omegaconf", "nvidia-ml-py"} <= names
    assert {"psutil", "numpy", "opencv-python-headless"} <= names
    # Pinned exactly as pyproject.toml pins them: one place for the ranges.
    assert "ray[rllib,serve,tune]>=2.60,<2.61" in reqs
    assert gpu_requirements(PYPROJECT, ["omegaconf"]) == ["omegaconf>=2.3,<2.4"]
    with pytest.raises(SystemExit, match="torch"):
        gpu_requirements(PYPROJECT, ["torch"])


def test_manylinux_tags_cover_every_older_glibc() -> None:
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "manylinux1_x86_64"
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert "manylinux2014_aarch64" in platform_tags("manylinux_2_17_aarch64")
    assert "manylinux2010_aarch64" in platform_tags("manylinux_2_17_aarch64")
    assert platform_tags("win_amd64") == ["win_amd64"]


def test_resolution_asks_pip_for_binaries_of_the_target_only(tmp_path: Path) -> None:
    opts = target_options("3.12", "manylinux_2_28_x86_64")
    assert opts[:5] == ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    abis = [opts[k + 1] for k, o in enumerate(opts) if o == "--abi"]
    assert abis == ["cp312", "abi3", "none"]
    cmd = resolve_command(["omegaconf"], "3.12", "manylinux_2_28_x86_64", tmp_path / "r.json",
                          tmp_path / "local", None, tmp_path / "t")  # fmt: skip
    assert cmd[:5] == [
        "install",
        "--dry-run",
        "--ignore-installed",
        "--report",
        str(tmp_path / "r.json"),
    ]
    assert cmd[-1] == "omegaconf" and "--constraint" not in cmd


def _report(*names: str) -> dict:
    return {
        "version": "1",
        "install": [
            {
                "metadata": {"name": name, "version": "1.0"},
                "download_info": {
                    "url": f"https://files.example/{name}-1.0-py3-none-any.whl",
                    "archive_info": {"hashes": {"sha256": "ab" * 32}},
                },
            }
            for name in names
        ],
    }


def test_report_is_parsed_and_cuda_or_tensorflow_refused() -> None:
    wheels = parse_report(_report("PyYAML", "omegaconf"))
    assert [w.name for w in wheels] == ["omegaconf", "pyyaml"]
    assert wheels[0] == Wheel(
        "omegaconf", "1.0", "https://files.example/omegaconf-1.0-py3-none-any.whl", "ab" * 32
    )
    assert wheels[0].filename == "omegaconf-1.0-py3-none-any.whl" and wheels[0].pure
    refuse_forbidden(parse_report(_report("nvidia-ml-py", "ray")))  # NVML bindings are fine
    for bad in ("torch", "nvidia-cudnn-cu12", "tensorflow", "tensorflow-io-gcs-filesystem"):
        assert FORBIDDEN.match(canonical(bad)), bad
        with pytest.raises(SystemExit, match=bad):
            refuse_forbidden(parse_report(_report("ray", bad)))


def test_ray_jars_are_stripped_with_their_record_lines(tmp_path: Path) -> None:
    wheel = tmp_path / "ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl"
    record = (
        "ray/__init__.py,sha256=aa,10\n"
        "ray/jars/ray_dist.jar,sha256=bb,3000000\n"
        "ray-2.60.0.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("ray/__init__.py", "x = 1\n")
        z.writestr("ray/jars/ray_dist.jar", os.urandom(300_000))
        z.writestr("ray-2.60.0.dist-info/RECORD", record)
    before, after = strip_ray_jars(wheel)
    assert before > 300_000 > after
    with zipfile.ZipFile(wheel) as z:
        assert z.namelist() == ["ray/__init__.py", "ray-2.60.0.dist-info/RECORD"]
        assert z.read("ray-2.60.0.dist-info/RECORD").decode() == (
            "ray/__init__.py,sha256=aa,10\nray-2.60.0.dist-info/RECORD,,\n"
        )
        assert z.testzip() is None


def _index_reachable() -> bool:
    """Whether pip reaches its package index (through its own configuration)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "omegaconf"],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_RETRIES": "0", "PIP_TIMEOUT": "10"},
        timeout=120,
    )
    return proc.returncode == 0


@pytest.mark.slow
def test_dry_run_resolves_a_subset_for_python_312(tmp_path: Path) -> None:
    if not _index_reachable():
        pytest.skip("no package index reachable")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "wheelhouse.py"), "--dry-run", "--only",
         "omegaconf", "psutil", "--python", "3.12"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = [line.split()[0] for line in proc.stdout.splitlines() if line.endswith(".whl")]
    names = {canonical(f.split("-")[0]) for f in files}
    # omegaconf needs PyYAML and antlr4 (built here from its sdist); psutil is abi3.
    assert names == {"omegaconf", "pyyaml", "antlr4-python3-runtime", "psutil"}
    assert any(f.startswith("pyyaml-") and "cp312-cp312-manylinux" in f for f in files)
    assert "antlr4_python3_runtime-4.9.3-py3-none-any.whl" in files
    assert not list(tmp_path.iterdir())  # a dry run leaves nothing behind
