"""Scaling that predicts (rlperf.report.compare.scaling, figures_scaling): the Universal
Scalability Law fit on synthetic curves with known σ, κ, and on the 2021 study's model1
"both GPUs" worker sweep (2, 4, 8, 16 env runners: tests/data/thesis and
tests/data/study_sweep, MIT, see their READMEs)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rlperf.errors import FigureNotApplicable
from rlperf.report.build import build_report
from rlperf.report.compare.scaling import scaling_curves
from rlperf.report.export import render
from rlperf.report.figures.plot import FigureContext
from rlperf.report.figures.scaling import reach, scaling, scaling_figure
from rlperf.report.read.collect import read_cells
from rlperf.report.sections.scaling import scaling_section
from rlperf.report.stats.usl import Param, _peak, efficiency, fit_usl, usl
from tests.conftest import DATA, NOT_BLANK_PNG_BYTES, THESIS

N = np.array([1, 2, 4, 8, 16, 32], dtype=float)
LAMBDA, SIGMA, KAPPA = 100.0, 0.05, 0.002
NOISE = 0.03  # multiplicative, as throughput noise is


def _measured(x: np.ndarray, sd: float = NOISE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x with the 95 % interval a measurement of relative sd ``sd`` would carry."""
    return x, x * np.exp(-1.96 * sd), x * np.exp(1.96 * sd)


def _noisy(seed: int = 0, lambda_: float = LAMBDA, sigma: float = SIGMA,
           kappa: float = KAPPA) -> np.ndarray:  # fmt: skip
    rng = np.random.default_rng(seed)
    return usl(N, lambda_, sigma, kappa) * np.exp(rng.normal(0.0, NOISE, N.size))


def test_fit_recovers_known_sigma_and_kappa_within_their_intervals():
    fit = fit_usl(N, *_measured(_noisy()))
    assert fit.sigma.low <= SIGMA <= fit.sigma.high
    assert fit.kappa.low <= KAPPA <= fit.kappa.high
    assert fit.lambda_.low <= LAMBDA <= fit.lambda_.high
    assert fit.kappa.low > 0  # the data bound κ away from 0: a peak in sight
    true_peak = math.sqrt((1 - SIGMA) / KAPPA)  # 21.8
    assert fit.n_star == pytest.approx(true_peak, rel=0.1)
    assert fit.n_star_low <= true_peak <= fit.n_star_high
    assert fit.has_peak and fit.n_star_count in (21, 22)
    assert fit.quality == "good" and fit.dof == 3 and fit.weighted
    assert fit.anomalies == ()
    assert np.all(np.abs(fit.residuals_rel) < 3 * NOISE)
    np.testing.assert_allclose(fit.residuals, fit.x - fit.predict(N)[0])
    # a count not measured: predicted with an interval that holds the true value
    x, lo, hi = (float(v[0]) for v in fit.predict([24]))
    assert lo < usl(np.array([24.0]), LAMBDA, SIGMA, KAPPA)[0] < hi and lo < x < hi


def test_intervals_cover_at_about_their_level():
    """Over 40 noisy sweeps, σ's and κ's 95 % intervals miss the truth at most a few
    times (they are Wald intervals, slightly conservative with measured weights)."""
    fits = [fit_usl(N, *_measured(_noisy(seed))) for seed in range(40)]
    sigma_in = sum(f.sigma.low <= SIGMA <= f.sigma.high for f in fits)
    kappa_in = sum(f.kappa.low <= KAPPA <= f.kappa.high for f in fits)
    assert sigma_in >= 35 and kappa_in >= 35


def test_linear_curve_has_no_peak():
    fit = fit_usl(N, *_measured(_noisy(seed=1, sigma=0.0, kappa=0.0)))
    assert not fit.has_peak
    assert fit.kappa.low == 0.0 and fit.kappa.value < 1e-4
    assert fit.sigma.value < 0.02
    assert fit.quality == "good"


def test_two_counts_are_too_few():
    fit = fit_usl([1, 2, 1, 2], [100, 190, 101, 188])
    assert fit.quality == "too few points" and not fit.fitted
    assert "at least 3 counts" in fit.reason
    assert np.isnan(fit.predict([4])[0]).all()


def test_three_counts_fit_without_a_residual():
    """3 counts, 3 parameters: the law passes through the points; intervals only from the
    measured intervals, never a verdict on the fit."""
    x = usl(np.array([1.0, 2.0, 4.0]), LAMBDA, SIGMA, KAPPA)
    bare = fit_usl([1, 2, 4], x)
    assert bare.quality == "too few points" and bare.dof == 0
    assert np.allclose(bare.residuals_rel, 0, atol=1e-6)
    assert math.isnan(bare.predict([8])[1][0])  # no interval without measured ones
    withci = fit_usl([1, 2, 4], *_measured(x))
    assert withci.quality == "too few points"
    assert withci.sigma.low <= SIGMA <= withci.sigma.high
    assert math.isfinite(withci.predict([8])[1][0])


def test_an_injected_anomaly_is_flagged_alone():
    x = _noisy()
    x[3] *= 0.75  # N = 8 runs 25 % slow
    fit = fit_usl(N, *_measured(x))
    assert fit.anomalies == (8.0,)
    assert fit.residuals_rel[3] < -0.15
    assert fit.sigma.low <= SIGMA <= fit.sigma.high  # the robust loss keeps the law
    assert fit.quality == "good"  # one anomaly is flagged, not held against the law


def test_a_law_that_does_not_hold_is_a_poor_fit():
    x = np.array([100, 40, 300, 60, 500, 80], dtype=float)  # zig-zag: no law of N
    fit = fit_usl(N, x)
    assert fit.quality == "poor" and "misses" in fit.reason


def test_efficiency_is_one_at_the_smallest_count():
    np.testing.assert_allclose(efficiency([2, 4, 8], [200, 300, 400]), [1.0, 0.75, 0.5])


def _frame(x: np.ndarray, counts: np.ndarray = N, **extra: object) -> pd.DataFrame:
    x, lo, hi = _measured(x)
    return pd.DataFrame({
        "family": "training", "status": "completed", "model": "synthetic",
        "workload": "synthetic · CartPole", "workers": counts.astype(int),
        "configuration": [f"c{int(n)}" for n in counts],
        "label": [f"synthetic · {int(n)} workers" for n in counts],
        "throughput": x, "throughput_ci_low": lo, "throughput_ci_high": hi, **extra,
    })  # fmt: skip


def test_curves_split_on_other_axes_and_count_workers_zero_as_one():
    one = _frame(_noisy(), gpu_layout="none")
    zero = _frame(_noisy(seed=2)[:4], np.array([0.0, 2.0, 4.0, 8.0]), gpu_layout="shared_gpu0")
    zero["configuration"] += "z"
    curves = scaling_curves(pd.concat([one, zero], ignore_index=True))
    assert [(c.title, c.axis) for c in curves] == [
        ("synthetic · no GPU", "workers"),
        ("synthetic · shared_gpu0", "workers"),
    ]
    shared = curves[1]
    assert shared.points["n"].tolist() == [1.0, 2.0, 4.0, 8.0]  # workers=0: the driver
    assert shared.points["fitted"].all()
    assert any("counted as N=1" in n for n in shared.note)
    assert any("GPU share" in n for n in shared.note)
    assert not any("GPU share" in n for n in curves[0].note)


def test_workers_zero_beside_one_is_shown_not_fitted():
    counts = np.array([0.0, 1.0, 2.0, 4.0, 8.0])
    x = np.concatenate([[80.0], usl(counts[1:], LAMBDA, SIGMA, KAPPA)])
    (curve,) = scaling_curves(_frame(x, counts))
    assert curve.points["fitted"].tolist() == [False, True, True, True, True]
    assert curve.fit.n.tolist() == [1.0, 2.0, 4.0, 8.0]
    assert any("not fitted" in n for n in curve.note)


def test_a_sweep_of_two_counts_makes_no_curve():
    assert scaling_curves(_frame(_noisy()[:2], N[:2])) == []


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study's model1 both-GPUs sweep: 4 and 16 workers from tests/data/thesis, 2 and
    8 from tests/data/study_sweep, read as the report reads them."""
    volta = THESIS / "ray_results" / "volta1_def"
    paths = [volta / "model1_both_gpus_4_workers", volta / "model1_both_gpus_16_workers",
             DATA / "study_sweep" / "volta1_def"]  # fmt: skip
    _, cells, skipped = read_cells(paths)
    res = build_report(paths, out=tmp_path_factory.mktemp("study"), figures=False)
    return cells, skipped, res


def test_study_sweep_cells_sample_different_work_per_iteration(study):
    cells, skipped, _ = study
    assert skipped == []
    steps = {c.axes["workers"]: set(c.iterations["env_steps"].dropna()) for c in cells}
    assert steps == {2: {4000}, 4: {4000}, 8: {4800}, 16: {6400}}


def test_study_sweep_fits_one_curve_and_prints_its_peak(study):
    _, _, res = study
    (curve,) = scaling_curves(res.configurations)
    assert curve.axis == "workers" and curve.title.startswith("model1")
    assert curve.points["count"].tolist() == [2, 4, 8, 16]
    # env steps per second, not 1 / iter_s: 16 workers beat 4 (375 vs 305), though their
    # iterations took longer (17.1 s vs 13.1 s) since they held 6400 env steps, not 4000
    x = dict(zip(curve.points["count"], curve.points["throughput"], strict=True))
    assert x[16] == pytest.approx(375, rel=0.01) and x[4] == pytest.approx(305, rel=0.01)
    assert x[2] < x[4] < x[8] < x[16]
    fit = curve.fit
    assert fit.fitted and fit.dof == 1 and math.isfinite(fit.n_star)
    assert np.all(np.isfinite(fit.residuals)) and np.all(np.abs(fit.residuals_rel) < 0.02)
    assert fit.kappa.low == 0.0 and not fit.has_peak  # 4 counts cannot bound the peak
    text = curve.text()
    assert "N* = " in text and "no peak in sight" in text and "(not measured)" in text
    assert any("GPU share" in n and "0.125 at N=16" in n for n in curve.note)
    blocks = scaling_section([curve])
    md = render.to_markdown(blocks, res.out)
    assert "## Scaling" in md and "residual" in md and "N* (peak)" in md


def test_answers_lead_with_one_sentence_and_fold_the_fit(study) -> None:
    """An answer reads in one breath: its sentence, and each verdict's, stays near 30
    words, and a scaling fit's parameters fold under it (in report.md, the indented line
    under the bullet, which does not repeat the sentence)."""
    _, _, res = study
    found = res.sections["answers"]
    md = res.markdown.read_text()
    answers = md[md.index("## Answers") :].split("\n## ", 2)[0]
    heads = [line[2:] for line in answers.splitlines() if line.startswith("- ")]
    words = {h: len([w for w in h.split() if w not in ("·", "†")]) for h in heads}
    assert len(heads) >= len(found) and max(words.values()) <= 32, words
    (runners,) = [x for x in found if x.question == "How many env runners pay off?"]
    assert runners.details and runners.details not in runners.sentence
    assert f"- {runners.sentence}\n  - {runners.details}" in md
    assert "USL σ" in runners.details and "USL" not in runners.sentence


def test_no_curve_no_section_no_figure(tmp_path):
    assert scaling_section([]) == []
    ctx = FigureContext(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {}, {},
                        configurations=_frame(_noisy()[:2], N[:2]))  # fmt: skip
    with pytest.raises(FigureNotApplicable, match="3 or more"):
        scaling(ctx, tmp_path)


def test_figure_draws_measured_points_fit_and_prediction(tmp_path):
    conf = _frame(_noisy())
    ctx = FigureContext(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {}, {},
                        configurations=conf)  # fmt: skip
    png = scaling(ctx, tmp_path)
    assert png.name == "scaling.png" and png.stat().st_size > NOT_BLANK_PNG_BYTES
    assert png.with_suffix(".svg").exists()
    (curve,) = scaling_curves(conf)
    assert reach(curve) == 64.0  # max(2 * 32, 1.5 * N*)
    fig = scaling_figure([curve])
    top, mid, bottom = fig.axes[:3]
    styles = [line.get_linestyle() for line in top.get_lines()]
    assert styles.count("-") >= 1 and styles.count("--") == 1  # fit, then prediction
    solid = next(ln for ln in top.get_lines()
                 if ln.get_linestyle() == "-" and len(ln.get_xdata()) > 10)  # fmt: skip
    assert max(solid.get_xdata()) == pytest.approx(32)  # solid only over the measured range
    dashed = next(ln for ln in top.get_lines() if ln.get_linestyle() == "--")
    assert min(dashed.get_xdata()) == pytest.approx(32)  # it starts where the solid ends
    assert max(dashed.get_xdata()) == pytest.approx(64)
    markers = [ln for ln in top.get_lines() if ln.get_marker() == "o"]
    assert len(markers[0].get_xdata()) == 6  # the six measured counts
    assert [int(t) for t in bottom.get_xticks()] == [1, 2, 4, 8, 16, 32, 64]
    assert bottom.get_xlabel() == "env runners (N)"
    assert top.get_ylabel() == "env steps per second" and mid.get_ylabel() == "parallel efficiency"


def test_a_contention_a_hair_below_one_gives_an_open_upper_end() -> None:
    """sigma = 1 - 1e-15 makes the delta method's variance of log N* enormous: N*'s upper
    end is infinite, not an OverflowError (seen on a real env-stage sweep in CI)."""
    p = np.array([3.03161312e03, 0.9999999999999989, 1.77357396e-02])
    cov = np.array([[2.27226502e02, 3.05126690e-02, 6.10253423e-02],
                    [3.05126790e-02, 5.21439209e-06, 1.04287847e-05],
                    [6.10253373e-02, 1.04287814e-05, 2.08575639e-05]])  # fmt: skip
    kap = Param(0.017735739630882364, 0.008784568036894518, 0.02668691122487021)
    sig = Param(0.9999999999999989, 0.9955244137285355, 1.0)
    n_star, low, high = _peak(p, cov, 1.959963984540054, kap, sig)
    assert math.isfinite(n_star) and high == math.inf and 0 <= low <= n_star
