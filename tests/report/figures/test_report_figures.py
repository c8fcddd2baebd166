"""Figures a person reads (issue 25, point 7), checked on the matplotlib objects.

Each figure is drawn from a :class:`~rlperf.report.figures.plot.FigureContext` holding tables with
the columns the report's own tables have (``configurations``, ``runs``), or from a search
folder as the search leaves it, and kept with :func:`~rlperf.report.figures.plot.keep_figures`:
titles, legends and notes lie inside the canvas and apart, count axes have whole-number
ticks, labels do not overlap, every search trial is drawn.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rlperf.errors import FigureNotApplicable
from rlperf.layout import METRICS_FILE, SEARCH_FILE
from rlperf.report.figures.inference import compression_tradeoff, fidelity_latency
from rlperf.report.figures.plot import FigureContext, keep_figures, objective_label
from rlperf.report.figures.registry import intervals
from rlperf.report.figures.search import draw_search_figures
from rlperf.report.figures.training import iter_time_vs_workers
from rlperf.report.read.searches import read_searches

#: As long as the report's mixed-fingerprint warning gets over a study-sized sweep.
NOTE = (
    "Warning: mixed hardware/software fingerprints fp1 (bench-host, Intel Xeon Gold 6138, "
    "ray 2.60.0), fp2 (bench-host, Intel Xeon Gold 6138, ray 2.61.0), fp3 (other-host, "
    "AMD EPYC 7763, ray 2.60.0)"
)


def _configurations(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A configurations table: the given rows with an interval of +-2 % around the value."""
    df = pd.DataFrame(rows)
    df["status"] = "completed"
    df["objective_ci_low"] = df["objective_value"] * 0.98
    df["objective_ci_high"] = df["objective_value"] * 1.02
    if "repeats" not in df:
        df["repeats"] = 1
    return df


def _context(configurations: pd.DataFrame, runs: pd.DataFrame | None = None) -> FigureContext:
    order = {
        (str(f), str(m)): list(g.sort_values("objective_value")["config"])
        for (f, m), g in configurations.groupby(["family", "model"])
    } if not configurations.empty else {}  # fmt: skip
    return FigureContext(
        iterations=pd.DataFrame(),
        latency=pd.DataFrame(),
        runs=runs if runs is not None else pd.DataFrame(),
        order=order,
        config_colors={},
        mixed_note={"training": NOTE, "inference": NOTE},
        configurations=configurations,
    )


def _draw(func: Any, ctx: FigureContext, out: Path) -> Any:
    """Draw one figure function and return its matplotlib Figure, laid out and rendered."""
    with keep_figures() as kept:
        png = func(ctx, out)
    return _rendered(kept[png.stem])


def _rendered(fig: Any) -> Any:
    """``fig`` drawn on the Agg canvas savefig used (a bare Figure's canvas cannot measure)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def _box(artist: Any, fig: Any) -> Any:
    return artist.get_window_extent(fig.canvas.get_renderer())


def _inside(box: Any, fig: Any) -> bool:
    whole = fig.bbox
    return (
        box.x0 >= whole.x0 - 0.5
        and box.y0 >= whole.y0 - 0.5
        and box.x1 <= whole.x1 + 0.5
        and box.y1 <= whole.y1 + 0.5
    )


def _assert_apart_and_inside(fig: Any, artists: dict[str, Any]) -> None:
    boxes = {name: _box(a, fig) for name, a in artists.items()}
    for name, box in boxes.items():
        assert _inside(box, fig), f"{name} reaches past the canvas: {box} vs {fig.bbox}"
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert not box_a.overlaps(box_b), f"{a} overlaps {b}"


def _integer_ticks(ax: Any, axis: str = "x") -> list[float]:
    """The tick positions matplotlib draws on ``axis`` (those inside the view)."""
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    locs = (ax.get_xticks() if axis == "x" else ax.get_yticks()).tolist()
    shown = [t for t in locs if lo - 1e-9 <= t <= hi + 1e-9]
    assert shown, f"no {axis} ticks"
    assert all(float(t).is_integer() for t in shown), f"non-integer {axis} ticks: {shown}"
    return shown


# --- objective_label ------------------------------------------------------------------


def test_objective_label_names_the_objective_and_its_unit() -> None:
    df = pd.DataFrame({"objective": ["time per 1 000 env steps"], "objective_unit": ["s"]})
    assert objective_label(df) == "time per 1 000 env steps (s)"
    assert objective_label(df.assign(objective_unit="ms")) == "time per 1 000 env steps (ms)"
    # Tables from before objective_unit existed: the unit is the metric's.
    assert objective_label(pd.DataFrame({"objective": ["mean iter_s"]})) == "mean iter_s (s)"
    assert objective_label(pd.DataFrame({"objective": ["median action_ms"]})) == (
        "median action_ms (ms)"
    )
    missing = pd.DataFrame({"objective": [None, "mean iter_s"], "objective_unit": [None, None]})
    assert objective_label(missing) == "mean iter_s (s)"


# --- iter_time_vs_workers ---------------------------------------------------------------


def _worker_sweep(workers: list[int], models: tuple[str, ...] = ("model1",)) -> pd.DataFrame:
    rows = []
    for model, setting in itertools.product(models, ("gpu0 · pinned", "both · all CPUs")):
        for w in workers:
            value = 40.0 / (1 + w) + (3.0 if setting.startswith("both") else 0.0)
            rows.append({"family": "training", "model": model, "workers": w,
                         "config": f"{setting} · {w} workers", "config_wo_workers": setting,
                         "objective": "time per 1 000 env steps", "objective_unit": "s",
                         "objective_value": value, "repeats": 3 if w == 2 else 1})  # fmt: skip
    return _configurations(rows)


@pytest.mark.parametrize("models", [("model1",), ("model1", "model3", "model4", "model5")])
def test_iter_time_vs_workers_keeps_title_legend_and_note_inside_and_apart(
    tmp_path: Path, models: tuple[str, ...]
) -> None:
    fig = _draw(iter_time_vs_workers, _context(_worker_sweep([2, 4, 8, 16], models)), tmp_path)
    title, note = fig._suptitle, fig._supxlabel
    assert "vs workers" in title.get_text() and note.get_text().startswith("Warning")
    [legend] = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    parts = {"title": title, "legend": legend, "note": note}
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(axes) == len(models)
    for i, ax in enumerate(axes):
        parts[f"axes {i}"] = ax
        assert ax.get_ylabel() == "time per 1 000 env steps (s)"
        assert ax.get_xlabel() == "env runners (workers)"
        assert _integer_ticks(ax) == [2, 4, 8, 16]
    _assert_apart_and_inside(fig, parts)


def test_iter_time_vs_workers_with_zero_workers_has_whole_number_ticks(tmp_path: Path) -> None:
    fig = _draw(iter_time_vs_workers, _context(_worker_sweep([0, 1, 2, 3])), tmp_path)
    [ax] = fig.axes
    assert ax.get_xscale() == "linear"  # 0 workers (the driver samples) has no log
    assert _integer_ticks(ax) == [0, 1, 2, 3]
    xs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
    assert xs == [0, 1, 2, 3]  # every configuration drawn, 0 included


# --- intervals ------------------------------------------------------------------------


def _facets() -> pd.DataFrame:
    rows = [
        *({"family": "training", "model": "model1", "config": f"gpu0 · {w} workers",
           "objective": "time per 1 000 env steps", "objective_unit": "s",
           "objective_value": 10.0 + w} for w in (2, 4, 8)),
        {"family": "training", "model": "model3", "config": "gpu0 · 8 workers",
         "objective": "time per 1 000 env steps", "objective_unit": "s",
         "objective_value": 7.0},
        *({"family": "inference", "model": "model1", "config": b, "objective": "median action_ms",
           "objective_unit": "ms", "objective_value": v}
          for b, v in (("rllib", 2.5), ("edgetpu", 0.8))),
    ]  # fmt: skip
    return _configurations(rows)


def test_intervals_leaves_out_single_configuration_facets(tmp_path: Path) -> None:
    fig = _draw(intervals, _context(_facets()), tmp_path)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == ["training · model1", "inference · model1"]  # model3 has one
    train, infer = fig.axes
    assert train.get_xlabel() == "time per 1 000 env steps (s)"
    assert infer.get_xlabel() == "median action_ms (ms)"
    # What varies in the facet's set: every one of them is gpu0.
    assert [t.get_text() for t in train.get_yticklabels()] == [
        "2 workers", "4 workers", "8 workers"
    ]  # fmt: skip
    _assert_apart_and_inside(fig, {"title": fig._suptitle, "training": train,
                                   "inference": infer})  # fmt: skip


def test_intervals_with_one_configuration_per_facet_is_not_drawn(tmp_path: Path) -> None:
    single = _facets().drop_duplicates(["family", "model"])
    with pytest.raises(FigureNotApplicable, match="single configuration"):
        intervals(_context(single), tmp_path)
    assert not list(tmp_path.iterdir())


# --- fidelity_latency and compression_tradeoff -----------------------------------------


def _variants() -> pd.DataFrame:
    """Six exported variants: per backend the same agreement and return on both models and
    nearly the same latency, so their points sit on top of each other."""
    rows = []
    for model, (backend, agree, ms) in itertools.product(
        ("model1", "model3"),
        (("tflite_fp32", 1.0, 3.1), ("tflite_int8", 0.962, 1.20), ("edgetpu", 0.955, 1.21)),
    ):
        rows.append({"model": model, "backend": backend, "config": f"{model} · {backend}",
                     "status": "completed", "fidelity_agreement": agree,
                     "fidelity_threshold": 0.95,
                     "action_ms_p50": ms + (model == "model3") * 0.01,
                     "return_mean": 20.0 - 200 * (1 - agree),
                     "model_size_bytes": 2.1e6})  # fmt: skip
    return pd.DataFrame(rows)


def _label_boxes(fig: Any, ax: Any) -> list[Any]:
    return [_box(t, fig) for t in ax.texts]


@pytest.mark.parametrize("func", [fidelity_latency, compression_tradeoff])
def test_variant_labels_do_not_overlap(tmp_path: Path, func: Any) -> None:
    runs = _variants()
    fig = _draw(func, _context(pd.DataFrame(), runs), tmp_path)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    if func is fidelity_latency:
        assert sorted(texts, key=int) == [str(i) for i in range(1, len(runs) + 1)]
        key = ax.get_legend()
        numbered = dict(t.get_text().split("  ", 1) for t in key.get_texts()
                        if "  " in t.get_text())  # fmt: skip
        assert sorted(numbered, key=int) == sorted(texts, key=int)  # one entry per number
        assert sorted(numbered.values()) == sorted(runs["config"])
        parts = {"title": fig._suptitle, "key": key, "note": fig._supxlabel, "axes": ax}
        _assert_apart_and_inside(fig, parts)
    else:
        assert sorted(texts) == sorted(runs["backend"])
    boxes = _label_boxes(fig, ax)
    for a, b in itertools.combinations(range(len(boxes)), 2):
        assert not boxes[a].overlaps(boxes[b]), f"labels {texts[a]!r} and {texts[b]!r} overlap"
    inside = ax.get_window_extent(fig.canvas.get_renderer())
    for box in boxes:
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 + 0.5
        assert inside.y0 <= box.y0 and box.y1 <= inside.y1 + 0.5


# --- search.png -----------------------------------------------------------------------


#: (status, score, episode_return_mean per iteration or None for no metrics.csv)
TRIALS = [
    ("completed", 620.0, [40.0, 120.0, 300.0, 450.0]),
    ("stopped_early", None, [30.0, 114.0]),
    ("stopped_early", None, [20.0, 87.0]),
    ("completed", 258.0, [60.0, 200.0, 460.0]),
    ("stopped_early", None, [25.0, 79.0]),
    ("completed", None, [50.0, 150.0, 300.0, 420.0]),  # the target was not reached
    ("failed", None, None),
]


def _search(root: Path) -> Path:
    """A search folder as rlperf's search leaves it: search.json, one folder per trial."""
    trials = []
    for i, (status, score, returns) in enumerate(TRIALS):
        subdir = f"trial_{i:05d}"
        (root / subdir).mkdir(parents=True)
        if returns is not None:
            pd.DataFrame({"iteration": np.arange(1, len(returns) + 1),
                          "episode_return_mean": returns}).to_csv(
                root / subdir / METRICS_FILE, index=False)  # fmt: skip
        trials.append({"number": i, "subdir": subdir, "status": status, "reason": None,
                       "score": score, "params": {"algo.lr": 1e-4 * (i + 1),
                                                  "algo.num_epochs": 4 * (1 + i % 3)}})  # fmt: skip
    data = {
        "algorithm": "optuna", "metric": "time_to_target_s", "mode": "min",
        "scheduler": {"name": "asha"}, "scheduler_metric": "episode_return_mean",
        "space": {"algo.lr": "log float [0.0001, 0.003]", "algo.num_epochs": "range(4, 13, 4)"},
        "trials": trials, "best": {**trials[3], "preset": "experiment/search_best.yaml"},
    }  # fmt: skip
    (root / SEARCH_FILE).write_text(json.dumps(data))
    return root


def _points(ax: Any) -> list[tuple[str, np.ndarray, bool]]:
    """(label, offsets, hollow) of every scatter on ``ax``."""
    out = []
    for coll in ax.collections:
        faces = coll.get_facecolors()
        hollow = len(faces) == 0 or bool((faces[:, 3] == 0).all())
        out.append((coll.get_label(), np.asarray(coll.get_offsets()), hollow))
    return out


def test_search_figure_draws_every_trial_with_whole_number_ticks(tmp_path: Path) -> None:
    [search] = read_searches([_search(tmp_path / "search")])
    with keep_figures() as kept:
        draw_search_figures([search], tmp_path / "figures")
    assert search.figure == tmp_path / "figures" / "search.png"
    fig = _rendered(kept["search"])
    trials_ax, lr_ax, epochs_ax = (ax for ax in fig.axes if ax.get_xlabel())
    twin = next(ax for ax in fig.axes if ax is not trials_ax and ax.bbox.bounds ==
                trials_ax.bbox.bounds)  # fmt: skip
    assert set(_integer_ticks(trials_ax)) <= set(range(len(TRIALS)))
    _integer_ticks(epochs_ax)
    drawn = {label: (xy, hollow) for label, xy, hollow in _points(trials_ax) + _points(twin)}
    assert sum(len(xy) for xy, _ in drawn.values()) == len(TRIALS)  # every trial drawn
    stopped, hollow = drawn["stopped early by ASHA (at its episode_return_mean)"]
    assert hollow
    assert stopped[:, 0].tolist() == [1, 2, 4]
    assert stopped[:, 1].tolist() == [114.0, 87.0, 79.0]  # the value ASHA stopped them on
    completed, hollow = drawn["completed"]
    assert not hollow and completed.tolist() == [[0, 620.0], [3, 258.0]]
    unreached, _ = drawn["no time_to_target_s (at its episode_return_mean)"]
    assert unreached.tolist() == [[5, 420.0]]
    assert drawn["no value (status in the table)"][0][:, 0].tolist() == [6]
    assert twin.get_ylabel().startswith("episode_return_mean")
    assert trials_ax.get_ylabel() == "time_to_target_s"
    [legend] = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "stopped early by ASHA (at its episode_return_mean)" in labels
    assert _inside(_box(legend, fig), fig)
