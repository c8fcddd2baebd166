"""``rlperf-report CANDIDATE --gate BASELINE``: regressions fail (exit 1), ties and
improvements pass (exit 0), a gate with nothing to compare is a user error (exit 2).

The baseline is a synthetic sweep replaying the study's measured iterations
(tests/support/synthetic.py); candidates are copies of it whose iteration times
are scaled, as a slower or faster build of the same configurations would be.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from support import synthetic

from rlperf.errors import GateError
from rlperf.layout import METRICS_FILE, STEPS_FILE
from rlperf.report import build_report
from rlperf.report.cli import main
from rlperf.report.compare.gate import DEFAULT_TOLERANCE, parse_tolerance
from rlperf.results.columns import PHASES
from tests.conftest import THESIS


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three configurations (the study's CPU-restriction runs), 30 iterations each: cell 0
    is ``ray_cpus``, 1 ``pinned``, 2 ``all CPUs`` (unrestricted)."""
    root = tmp_path_factory.mktemp("gate") / "baseline"
    synthetic.study_training_sweep(THESIS / "ray_results" / "volta1_cpus", root, iterations=30)
    return root


def _scaled(baseline: Path, dest: Path, factors: dict[str, float]) -> Path:
    """A copy of ``baseline`` whose cell ``name`` takes ``factor`` times as long per
    iteration (every phase scaled)."""
    shutil.copytree(baseline, dest)
    for name, factor in factors.items():
        path = dest / name / METRICS_FILE
        df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        for col in (*PHASES, "other_s", "iter_s"):
            df[col] *= factor
        df["time_s"] = df["iter_s"].cumsum()
        df.to_csv(path, index=False)
    return dest


def _gate(candidate: Path, baseline: Path, out: Path) -> int:
    """``rlperf-report CANDIDATE --gate BASELINE --no-figures -q --out OUT``."""
    return main([str(candidate), "--gate", str(baseline), "--no-figures", "-q", "--out", str(out)])


def test_clear_slowdown_fails_tie_and_improvement_pass(baseline, tmp_path, capsys):
    cand = _scaled(baseline, tmp_path / "candidate", {"0": 1.30, "1": 1.02, "2": 0.70})
    status = _gate(cand, baseline, tmp_path / "out")
    out = capsys.readouterr().out.splitlines()
    assert status == 1
    assert out[0].startswith(
        f"gate: candidate vs baseline {baseline} (tolerance 5%, 95% intervals)"
    )
    assert out[0].endswith("1 regression, 0 missing, 1 tie, 1 improvement, 0 new")
    regression, tie, improvement = out[1:4]
    assert regression.startswith("REGRESSION   training model1 · ray_cpus: speedup 0.769× [")
    assert regression.endswith(", 1 run; baseline 3.152 s, 1 run)")  # s per 1 000 env steps
    assert tie.startswith("TIE          training model1 · pinned: speedup 0.98")
    assert improvement.startswith("IMPROVEMENT  training model1 · all CPUs: speedup 1.42")
    assert out[4] == "gate: FAILED (1 regression)"
    assert out[5] == str(tmp_path / "out" / "report.html")
    gate = pd.read_csv(tmp_path / "out" / "gate.csv").set_index("verdict")
    assert gate.loc["regression", "speedup_ci_high"] < 1 - DEFAULT_TOLERANCE
    assert gate.loc["tie", "speedup_ci_high"] >= 1 - DEFAULT_TOLERANCE
    assert gate.loc["improvement", "speedup_ci_low"] > 1 + DEFAULT_TOLERANCE
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Gate" in md and "**FAILED (1 regression)**" in md


def test_small_slowdown_passes_at_the_default_tolerance_and_fails_a_tight_one(baseline, tmp_path):
    cand = _scaled(baseline, tmp_path / "candidate", {"1": 1.03})
    loose = build_report([cand], tmp_path / "loose", gate=baseline, figures=False)
    assert loose.gate is not None and not loose.gate.failed
    row = next(r for r in loose.gate.rows if r.label == "model1 · pinned")
    assert row.verdict == "tie" and row.speedup is not None
    assert row.speedup.high < 0.995  # the slowdown is real, but within 5 %
    tight = build_report([cand], tmp_path / "tight", gate=baseline, tolerance=0.005,
                         figures=False)  # fmt: skip
    assert tight.gate is not None and tight.gate.failed
    assert [r.label for r in tight.gate.rows if r.verdict == "regression"] == ["model1 · pinned"]


@pytest.mark.parametrize(
    ("removed", "status", "expected"),
    [
        ((), 0, ["0 regression, 0 missing, 3 tie, 0 improvement, 0 new",
                 "gate: passed (no regression beyond 5%)"]),
        (("2",), 1, ["MISSING      training model1 · all CPUs [not in the candidate]",
                     "gate: FAILED (1 missing)"]),
    ],
)  # fmt: skip
def test_identical_candidate_ties_and_a_missing_configuration_fails(
    baseline, tmp_path, capsys, removed, status, expected
):
    cand = _scaled(baseline, tmp_path / "candidate", {})
    for name in removed:
        shutil.rmtree(cand / name)
    assert _gate(cand, baseline, tmp_path / "out") == status
    out = capsys.readouterr().out
    for line in expected:
        assert line in out


def test_nothing_to_compare_and_bad_tolerance_are_user_errors(baseline, tmp_path, capsys):
    other = tmp_path / "other"
    synthetic.study_training_sweep(THESIS / "ray_results" / "volta1_cpus", other,
                                   iterations=31)  # another train.iterations: no match  # fmt: skip
    assert _gate(other, baseline, tmp_path / "out") == 2
    assert "no configuration of the candidate is in the baseline" in capsys.readouterr().err
    assert main([str(baseline), "--gate", str(baseline), "--tolerance", "150%",
                 "--out", str(tmp_path / "out2")]) == 2  # fmt: skip
    assert "--tolerance must be" in capsys.readouterr().err
    assert not (tmp_path / "out2").exists()


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), ("2.5 %", 0.025), ("0.1", 0.1)])
def test_parse_tolerance(text, value):
    assert parse_tolerance(text) == pytest.approx(value)


def test_parse_tolerance_rejects_nonsense():
    with pytest.raises(GateError, match="expected e.g. 5% or 0.05"):
        parse_tolerance("five")


def test_inference_latency_regression(tmp_path):
    """The gate judges inference configurations on their median latency per action."""
    base = tmp_path / "baseline"
    synthetic.study_inference_sweep(THESIS, base, steps_per_episode=60)
    cand = tmp_path / "candidate"
    shutil.copytree(base, cand)
    slow = next(p.parent.parent for p in cand.glob("*/.hydra/config.yaml")
                if "name: edgetpu" in p.read_text())  # fmt: skip
    steps = pd.read_csv(slow / STEPS_FILE)
    steps.assign(action_ms=steps["action_ms"] * 1.5).to_csv(slow / STEPS_FILE, index=False)
    res = build_report([cand], tmp_path / "out", gate=base, figures=False)
    assert res.gate is not None and res.gate.failed
    (regression,) = [r for r in res.gate.rows if r.verdict == "regression"]
    assert regression.family == "inference" and "edgetpu" in regression.label
    assert regression.speedup is not None
    assert regression.speedup.value == pytest.approx(1 / 1.5, rel=0.01)
    assert {r.verdict for r in res.gate.rows if r is not regression} == {"tie"}
