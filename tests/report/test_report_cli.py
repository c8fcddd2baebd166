"""``rlperf-report`` as a command: errors, progress, mixed fingerprints and ``--strict``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import synthetic

from rlperf.errors import MixedFingerprintsError
from rlperf.report import build_report
from rlperf.report.cli import main
from tests.conftest import THESIS


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same training sweep recorded on two machines with different software."""
    root = tmp_path_factory.mktemp("runs")
    synthetic.study_training_sweep(THESIS / "ray_results" / "volta1_cpus", root / "a",
                                   iterations=8)  # fmt: skip
    other = synthetic.fingerprint(host="other", cpu_model="AMD EPYC 7763", cpu_count=64,
                                  gpus=("NVIDIA H100 80GB HBM3",), ray="2.60.1")  # fmt: skip
    synthetic.study_training_sweep(THESIS / "ray_results" / "volta1_cpus", root / "b",
                                   iterations=8, fp=other)  # fmt: skip
    return root


def test_help_is_fast_and_imports_nothing_heavy():
    code = (
        "import sys; from rlperf.report import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "heavy = {'pandas', 'matplotlib', 'seaborn', 'scipy', 'numpy'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--baseline" in out.stdout and "--strict" in out.stdout


def test_path_without_runs_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "notes.csv").write_text("a,b\n1,2\n")
    assert main([str(tmp_path / "empty")]) == 2  # a user error (docs/exit-codes.md)
    err = capsys.readouterr().err
    assert "error:" in err and "no runs found" in err and str(tmp_path / "empty") in err
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report").exists()


def test_mixed_fingerprints_warn_in_every_affected_table(two_machines, tmp_path):
    res = build_report([two_machines / "a", two_machines / "b"], tmp_path, figures=False)
    assert res.mixed == {("training", "model1"): ["fp1", "fp2"]}
    md = (tmp_path / "report.md").read_text()
    affected = md.split("### model1", 1)[1].split("###", 1)[0]
    assert "rows of this table were recorded on different hardware or software" in affected
    assert "AMD EPYC 7763 ×64" in affected and "Intel Xeon Gold 6138 ×40" in affected
    # What differs is named; what a sweep varies on purpose (CUDA_VISIBLE_DEVICES, the
    # config) and what differs between identical machines (host, GPU UUIDs) is not compared.
    assert "libraries.ray" in affected and "cpu_model" in affected and "gpus.0.name" in affected
    assert "uuid" not in affected and "cuda_visible_devices" not in affected
    assert any("different hardware or software" in w for w in res.warnings)
    # Both sweeps hold the same configurations; labels tell them apart by sweep folder.
    labels = set(res.runs["label"])
    assert "model1 · pinned (a)" in labels
    assert "model1 · pinned (b)" in labels
    assert set(res.runs["fingerprint"]) == {"fp1", "fp2"}
    # The same configuration on two machines is two configurations, never pooled repeats.
    confs = res.configurations
    assert len(confs) == len(res.runs) and (confs["repeats"] == 1).all()


def test_strict_refuses_and_exits_non_zero(two_machines, tmp_path, capsys):
    with pytest.raises(MixedFingerprintsError):
        build_report([two_machines], tmp_path / "lib", strict=True)
    out = tmp_path / "cli"
    assert main([str(two_machines / "a"), str(two_machines / "b"), "--strict",
                 "--out", str(out)]) == 2  # fmt: skip
    assert "--strict refuses" in capsys.readouterr().err
    assert not out.exists()
    # One machine only: --strict has nothing to refuse.
    assert main([str(two_machines / "a"), "--strict", "--no-figures", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out / "report.html")
    assert "rlperf-report: read 3/3 cells (0 skipped)" in captured.err


def test_unknown_baseline_is_an_error(two_machines, tmp_path, capsys):
    assert main([str(two_machines / "a"), "--baseline", "gpu_layout=tpu", "--no-figures",
                 "--out", str(tmp_path)]) == 2  # fmt: skip
    assert "--baseline gpu_layout=tpu matches no completed cell" in capsys.readouterr().err
