"""The installed wheel works without a checkout, and a user's ``./conf`` joins the shipped one.

The wheel is built offline (``--no-build-isolation``) and installed with
``--no-deps --no-index`` into a fresh venv whose only other packages are this
test environment's (a ``.pth`` line adds its site-packages; ``.pth`` files found
there, such as the editable install's finder, are *not* processed, so the
checkout's ``rlperf`` cannot leak in). Commands run from a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

#: What the wheel is not built from: top-level run folders, venvs, caches, test data.
_NOT_SOURCE = (".git", ".venv*", "build", "*.egg-info", "outputs", "multirun", "report", "tests",
               "benchmarks", "__pycache__", ".*_cache", ".nox")  # fmt: skip


def _top_level_only(folder: str, names: list[str]) -> set[str]:
    """shutil.copytree ignore: :data:`_NOT_SOURCE` at the repository's top level only."""
    if Path(folder) != REPO:
        return {n for n in names if n == "__pycache__"}
    return set(shutil.ignore_patterns(*_NOT_SOURCE)(folder, names))


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        args, cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the venv's bin folder, the wheel) after building and installing rlperf's wheel."""
    root = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ and *.egg-info into the source tree,
    # and a stale build/lib would put deleted files into the next wheel.
    source = root / "source"
    shutil.copytree(REPO, source, ignore=_top_level_only)
    dist = root / "dist"
    build = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(dist), str(source)],
        cwd=root,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("rlperf-*.whl")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    purelib = _run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root
    ).stdout.strip()
    # Every site-packages this interpreter sees (a venv layered over another has two).
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (Path(purelib) / "reuse_test_env.pth").write_text("\n".join(ours) + "\n")
    inst = _run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        cwd=root,
    )  # fmt: skip
    assert inst.returncode == 0, inst.stderr
    return venv / "bin", wheel


def test_wheel_lists_every_package_and_config(installed: tuple[Path, Path]) -> None:
    _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]
    on_disk = {
        ".".join(p.parent.relative_to(REPO).parts)
        for root in ("rlperf", "hydra_plugins")
        for p in (REPO / root).rglob("__init__.py")
    }
    assert on_disk - {"rlperf.conf"} <= set(packages), "a package folder is missing in pyproject"
    shipped = sorted(str(p.relative_to(REPO / "conf")) for p in (REPO / "conf").rglob("*.yaml"))
    assert shipped and all(f"rlperf/conf/{name}" in names for name in shipped)


def test_installed_rlperf_runs_without_the_checkout(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, _ = installed
    where = _run([str(bin_dir / "python"), "-c", "import rlperf; print(rlperf.__file__)"], tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent), where.stdout
    assert not Path(where.stdout.strip()).is_relative_to(REPO)
    job = _run([str(bin_dir / "rlperf"), "--cfg", "job"], tmp_path)
    assert job.returncode == 0, job.stderr
    assert "name: model1" in job.stdout and "stage: train" in job.stdout


def test_user_conf_folder_adds_and_overrides_options(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, _ = installed
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "model").mkdir()
    (conf / "experiment" / "my_sweep.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: my_net\ntrain:\n  iterations: 7\n"
    )
    (conf / "model" / "my_net.yaml").write_text(
        "defaults:\n  - /schema/model/vision@_here_\n  - _self_\n"
        "name: my_net\ndim: 42\nframestack: 4\n"
        "conv_filters: [[4, [8, 8], 4], [8, [4, 4], 2], [16, [6, 6], 1]]\n"
    )
    # Same name as a shipped option: the user's wins.
    (conf / "experiment" / "quickstart.yaml").write_text(
        "# @package _global_\ntrain:\n  iterations: 11\n"
    )
    mine = _run([str(bin_dir / "rlperf"), "experiment=my_sweep", "--cfg", "job"], tmp_path)
    assert mine.returncode == 0, mine.stderr
    assert "name: my_net" in mine.stdout and "iterations: 7" in mine.stdout
    default = _run([str(bin_dir / "rlperf"), "--cfg", "job"], tmp_path)
    assert default.returncode == 0, default.stderr
    assert "iterations: 11" in default.stdout
    search = _run([str(bin_dir / "rlperf"), "--info", "searchpath"], tmp_path)
    lines = [ln for ln in search.stdout.splitlines() if "://" in ln]
    order = [ln.split("|")[2].strip() for ln in lines]
    assert order.index(f"file://{conf.resolve()}") < order.index("pkg://rlperf.conf")

    (conf / "config.yaml").write_text("stage: train\n")
    clash = _run([str(bin_dir / "rlperf"), "--cfg", "job"], tmp_path)
    assert clash.returncode == 2
    assert "config.yaml" in clash.stderr and "Traceback" not in clash.stderr
