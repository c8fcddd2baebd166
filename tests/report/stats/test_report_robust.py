"""rlperf.report.stats.robust against rliable 1.2 and hand-worked cases; the returns figure.

``tests/data/rliable_reference.json`` holds rliable 1.2's values on fixed arrays
(``scripts/rliable_reference.py`` says how to rewrite it). Point estimates must equal
rliable's to 1e-9. Intervals two ways: with rliable's seed and resample count they must
be rliable's to 1e-9 (the same index stream, so the same resamples: a check of the
method itself), and with another seed at 2 000 resamples within TOLERANCE of the
interval width of rliable's 50 000-resample interval (a check that the interval is not
an artefact of one stream; see TOLERANCE for the margin).
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from scipy import stats

from rlperf.report.figures.plot import keep_figures
from rlperf.report.figures.returns import return_profiles
from rlperf.report.stats import robust
from rlperf.report.stats.robust import (
    compare_returns,
    iqm,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap_ci,
    unit_of,
)
from tests.conftest import DATA

REFERENCE = json.loads((DATA / "rliable_reference.json").read_text())
CASES = REFERENCE["cases"]
#: Interval endpoints from another stream may differ from rliable's 50 000-resample ones
#: by this fraction of the interval's width. Measured on these cases over 50 seeds at
#: 2 000 resamples: the endpoints scatter with a standard deviation of at most 3.2 % of
#: the width (1.2-1.9 % on the 5 x 4 suite, up to 3.2 % on the one-task, tied episodes)
#: and lie at most 8.3 % of it from rliable's, so 15 % is over 4 standard deviations
#: from the worst case. A bootstrap that pools the tasks lands 40-440 % of the width
#: away; subtler mistakes (runs resampled jointly across tasks, a "basic" interval)
#: move endpoints by only 5-23 %, which the same-stream check at 1e-9 catches.
TOLERANCE = 0.15
OTHER_SEED = 1


def scores(case: str) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float) for k, v in CASES[case]["scores"].items()}


def pairs(case: str) -> list[tuple[str, str, str]]:
    names = list(CASES[case]["scores"])
    return [(f"{n}>{names[0]}", n, names[0]) for n in names[1:]]


def near(mine: tuple[float, float], ref: dict[str, float]) -> None:
    width = ref["high"] - ref["low"]
    assert width > 0
    assert abs(mine[0] - ref["low"]) <= TOLERANCE * width, (mine, ref)
    assert abs(mine[1] - ref["high"]) <= TOLERANCE * width, (mine, ref)


@pytest.mark.parametrize("case", list(CASES))
def test_iqm_and_its_interval_are_rliables(case: str) -> None:
    ref, seed, reps = CASES[case]["iqm"], CASES[case]["seed"], CASES[case]["reps"]
    for name, arr in scores(case).items():
        est = stratified_bootstrap_ci(arr, iqm, reps=reps, seed=seed)
        assert est.value == pytest.approx(ref[name]["value"], abs=1e-9)
        assert (est.low, est.high) == pytest.approx((ref[name]["low"], ref[name]["high"]), abs=1e-9)
        assert (est.n, est.tasks) == arr.shape
        other = stratified_bootstrap_ci(arr, iqm, reps=2000, seed=OTHER_SEED)
        near((other.low, other.high), CASES[case]["iqm_precise"][name])


@pytest.mark.parametrize("case", list(CASES))
def test_probability_of_improvement_and_its_interval_are_rliables(case: str) -> None:
    arrays, seed, reps = scores(case), CASES[case]["seed"], CASES[case]["reps"]
    for key, x, y in pairs(case):
        ref = CASES[case]["probability_of_improvement"][key]
        p, low, high = probability_of_improvement(arrays[x], arrays[y], reps=reps, seed=seed)
        assert p == pytest.approx(ref["value"], abs=1e-9)
        assert (low, high) == pytest.approx((ref["low"], ref["high"]), abs=1e-9)
        _, low2, high2 = probability_of_improvement(arrays[x], arrays[y], 2000, OTHER_SEED)
        near((low2, high2), CASES[case]["probability_of_improvement_precise"][key])


@pytest.mark.parametrize("case", list(CASES))
def test_performance_profile_and_its_band_are_rliables(case: str) -> None:
    taus, seed, reps = CASES[case]["taus"], CASES[case]["seed"], CASES[case]["reps"]
    for name, arr in scores(case).items():
        ref = CASES[case]["profile"][name]
        fraction, low, high = performance_profile(arr, taus, reps=reps, seed=seed)
        np.testing.assert_allclose(fraction, ref["fraction"], rtol=0, atol=1e-9)
        np.testing.assert_allclose(low, ref["low"], rtol=0, atol=1e-9)
        np.testing.assert_allclose(high, ref["high"], rtol=0, atol=1e-9)


def test_a_profile_band_from_another_stream_is_near_rliables_precise_one() -> None:
    # Profiles of 5 runs x 4 tasks are fractions of 20 scores: the band's ends sit on
    # multiples of 1/20 (or between two), so they are compared to within one step.
    case = CASES["suite"]
    for name, arr in scores("suite").items():
        ref = case["profile_precise"][name]
        _, low, high = performance_profile(arr, case["taus"], reps=2000, seed=OTHER_SEED)
        assert np.abs(low - ref["low"]).max() <= 1 / arr.size + 1e-12
        assert np.abs(high - ref["high"]).max() <= 1 / arr.size + 1e-12


def test_intervals_are_deterministic_for_a_seed_and_differ_across_seeds() -> None:
    arr = scores("suite")["B"]
    a = stratified_bootstrap_ci(arr, iqm, reps=500, seed=3)
    b = stratified_bootstrap_ci(arr, iqm, reps=500, seed=3)
    c = stratified_bootstrap_ci(arr, iqm, reps=500, seed=4)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)


def test_resampling_is_stratified_by_task() -> None:
    # Task means 0 and 100: a resample that mixed runs across tasks would move the mean
    # by tens; resampled within tasks the mean stays within the runs' spread.
    arr = np.column_stack([np.array([0.0, 1, 2, 3]), np.array([100.0, 101, 102, 103])])
    est = stratified_bootstrap_ci(arr, np.mean, reps=1000, seed=0)
    assert est.value == pytest.approx(51.5)
    assert 50.0 <= est.low < est.value < est.high <= 53.0
    dist = robust.bootstrap_distribution(arr, lambda s: s[:, 1].min(), reps=200, seed=0)
    assert dist.min() >= 100.0  # task 1's resamples hold task 1's runs only


def test_iqm_by_hand() -> None:
    assert iqm(np.arange(1.0, 9.0)) == pytest.approx(np.mean([3, 4, 5, 6]))
    assert iqm(np.arange(1.0, 9.0).reshape(4, 2)) == pytest.approx(4.5)  # all entries
    assert iqm([1.0, 2.0, 3.0, 1000.0]) == pytest.approx(2.5)  # an outlier is trimmed
    assert np.isnan(iqm([]))


def test_probability_of_improvement_by_hand() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert probability_of_improvement(x, x, reps=200)[0] == 0.5
    p, low, high = probability_of_improvement(x + 10, x, reps=200)
    assert (p, low, high) == (1.0, 1.0, 1.0)
    assert probability_of_improvement(x, x + 10, reps=200)[0] == 0.0
    # 3 of 4 pairs won, one tied: (3 + 0.5) / 4; tasks are averaged.
    assert probability_of_improvement([2.0, 3.0], [1.0, 2.0], reps=10)[0] == 0.875
    two = probability_of_improvement(np.c_[[2.0, 3.0], [0.0, 0.0]], np.c_[[1.0, 2.0], [1, 1]])
    assert two[0] == pytest.approx((0.875 + 0.0) / 2)
    u = stats.mannwhitneyu([5.0, 1, 4, 4], [4.0, 2, 2], alternative="greater").statistic
    assert probability_of_improvement([5.0, 1, 4, 4], [4.0, 2, 2])[0] == pytest.approx(u / 12)
    rng = np.random.default_rng(5)  # many ties, unequal sizes: scipy's U over n * m
    for _ in range(50):
        a, b = (rng.integers(0, 4, size=rng.integers(1, 9)).astype(float) for _ in range(2))
        u = stats.mannwhitneyu(a, b, alternative="greater").statistic
        assert robust.improvement(a, b) == pytest.approx(u / (a.size * b.size), abs=1e-12)


def test_fewer_than_two_runs_have_no_interval() -> None:
    est = stratified_bootstrap_ci([3.0], iqm, unit="episode")
    assert (est.value, est.n, est.unit, est.has_ci) == (3.0, 1, "episode", False)
    assert np.isnan(probability_of_improvement([1.0], [0.0, 2.0])[1])
    assert not stratified_bootstrap_ci([np.nan, np.nan]).n  # non-finite runs dropped


def test_unit_of() -> None:
    assert [unit_of(n) for n in (0, 1, 2, 3, 10)] == ["episode"] * 3 + ["seed"] * 2


def test_compare_returns_table() -> None:
    arrays = scores("suite")
    table = compare_returns(arrays, unit="seed", reps=500, seed=0)
    assert list(table["label"]) == ["A", "B", "C"]
    assert (table["n"] == 5).all() and (table["unit"] == "seed").all()
    assert (table["reference"] == "A").all()
    a = table.set_index("label")
    assert a.loc["A", ["p_improvement", "p_improvement_low", "p_improvement_high"]].isna().all()
    for name, arr in arrays.items():
        assert a.loc[name, "iqm"] == pytest.approx(CASES["suite"]["iqm"][name]["value"])
        assert a.loc[name, "mean"] == pytest.approx(arr.mean())
        assert a.loc[name, "median"] == pytest.approx(np.median(arr))
        assert a.loc[name, "iqm_low"] < a.loc[name, "iqm"] < a.loc[name, "iqm_high"]
    for key, x, _ in pairs("suite"):
        ref = CASES["suite"]["probability_of_improvement"][key]["value"]
        assert a.loc[x, "p_improvement"] == pytest.approx(ref)
    assert a.loc["C", "p_improvement_low"] > 0.5  # C's shift of 1.5 sd holds up
    # A group's interval does not depend on which other groups are in the table.
    alone = compare_returns({"B": arrays["B"]}, unit="seed", reps=500, seed=0)
    assert alone.loc[0, "iqm_low"] == a.loc["B", "iqm_low"]
    by_c = compare_returns(arrays, unit="seed", reference="C", reps=100).set_index("label")
    assert by_c.loc["A", "p_improvement"] == pytest.approx(1 - a.loc["C", "p_improvement"])
    with pytest.raises(ValueError, match="unit"):
        compare_returns(arrays, unit="run")
    with pytest.raises(ValueError, match="reference"):
        compare_returns(arrays, unit="seed", reference="D")
    with pytest.raises(ValueError, match="tasks"):
        compare_returns({"A": arrays["A"], "one": [1.0, 2.0]}, unit="seed")


def test_compare_returns_on_episodes() -> None:
    eps = {k: v[:, 0] for k, v in scores("episodes").items()}  # 1-d: one task
    table = compare_returns(eps, unit=unit_of(1), reps=500).set_index("label")
    assert list(table["n"]) == [12, 10] and set(table["unit"]) == {"episode"}
    ref = CASES["episodes"]["probability_of_improvement"]["variant>base"]["value"]
    assert table.loc["variant", "p_improvement"] == pytest.approx(ref)


def test_two_thousand_resamples_of_a_thousand_episodes_are_fast() -> None:
    # Measured 0.1 s (IQM) + 0.25 s (P(improvement)) on one shared core; a per-resample
    # sort or a Python call per resample took 2 s for the latter.
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=1000), rng.normal(0.1, 1, size=1000)
    start = time.perf_counter()
    stratified_bootstrap_ci(x, iqm, reps=2000)
    probability_of_improvement(x, y, reps=2000)
    assert time.perf_counter() - start < 2.0


def test_return_profiles_figure(tmp_path) -> None:
    arrays = scores("suite")
    with keep_figures() as kept:
        png = return_profiles(arrays, "seed", tmp_path, "returns", "returns per algorithm",
                              reps=200)  # fmt: skip
    assert png == tmp_path / "returns.png" and png.stat().st_size > 0
    assert (tmp_path / "returns.svg").exists()
    left, right = kept["returns"].axes
    assert left.get_xlabel().endswith("unit: seed") and "IQM" in left.get_xlabel()
    assert right.get_xlabel() == "episode return τ; unit: seed"
    assert right.get_ylabel() == "fraction of seeds with return > τ"
    assert [t.get_text() for t in left.get_yticklabels()] == ["A (n=5)", "B (n=5)", "C (n=5)"]
    # One error bar per group at its IQM; one profile per group, from 1 down to 0.
    points = [c.get_children()[0].get_xdata()[0] for c in left.containers]
    assert points == pytest.approx([iqm(a) for a in arrays.values()])
    lines = right.get_lines()
    assert [ln.get_label() for ln in lines] == ["A", "B", "C"]
    for ln in lines:
        y = np.asarray(ln.get_ydata())
        assert y[0] == 1.0 and y[-1] == 0.0 and (np.diff(y) <= 0).all()
    assert kept["returns"].get_suptitle() == "returns per algorithm"
