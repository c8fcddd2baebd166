"""Learning curves (issue 25, point 5), checked on the matplotlib objects.

The iterations, runs and configurations tables are built directly with the report's column
names (as :mod:`rlperf.report.tables.tidy` writes them). Configuration ``ppo`` ran 3 seeds whose
returns are known (seed k returns (10 + k) · i at iteration i), so its mean and 95 % band
at a point are computed by hand here; ``dqn`` ran once and was evaluated greedily; both
share a target. A second workload, ``model3``, holds one configuration of 2 seeds.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rlperf.errors import FigureNotApplicable
from rlperf.report.figures.learning import Y_LABEL, common_grid, learning_curves, mean_curve
from rlperf.report.figures.plot import FigureContext, keep_figures

ITERATIONS = 8
STEPS = 1000  # env steps per iteration
#: Student's t, 0.975 quantile, 2 degrees of freedom (3 seeds), from a table.
T_2 = 4.302652729911275
W1 = "model1 · PPO/DQN · target 150"
W3 = "model3 · PPO · no target"


def _run(cell: str, returns: list[float], time_s: list[float],
         evals: list[float] | None = None) -> pd.DataFrame:  # fmt: skip
    i = np.arange(1, ITERATIONS + 1)
    return pd.DataFrame({
        "cell": cell, "iteration": i,
        "excluded": ["warmup" if k <= 2 else "" for k in i],  # warm-up is still drawn
        "time_s": time_s, "train_time_s": np.asarray(time_s) - 1.0,
        "env_steps": STEPS, "episode_return_mean": returns,
        "eval_return_mean": evals if evals is not None else np.nan,
    })  # fmt: skip


def _tables() -> FigureContext:
    i = np.arange(1, ITERATIONS + 1, dtype=float)
    frames, runs = [], []
    for k in range(3):  # ppo: seed k returns (10 + k) * i, no episode finished in iteration 1
        returns = ((10 + k) * i).tolist()
        returns[0] = math.nan
        frames.append(_run(f"ppo-s{k}", returns, (5 * i + k).tolist()))
        runs.append({"cell": f"ppo-s{k}", "configuration": "ppo-s0", "workload": W1,
                     "config": "PPO", "model": "model1", "seed": k})  # fmt: skip
    evals = [math.nan] * ITERATIONS
    evals[3], evals[7] = 60.0, 140.0  # evaluated after iterations 4 and 8
    frames.append(_run("dqn", (4 * i).tolist(), (7 * i).tolist(), evals))
    runs.append({"cell": "dqn", "configuration": "dqn", "workload": W1, "config": "DQN",
                 "model": "model1", "seed": 0})  # fmt: skip
    for k in range(2):
        frames.append(_run(f"m3-s{k}", (3 * i + k).tolist(), (2 * i).tolist()))
        runs.append({"cell": f"m3-s{k}", "configuration": "m3-s0", "workload": W3,
                     "config": "PPO", "model": "model3", "seed": k})  # fmt: skip
    iterations = pd.concat(frames, ignore_index=True)
    runs_df = pd.DataFrame(runs).assign(status="completed", family="training")
    # The iterations table carries the run's identity columns but not its workload.
    iterations = iterations.merge(runs_df[["cell", "config", "model", "status"]], on="cell")
    configurations = pd.DataFrame({
        "configuration": ["ppo-s0", "dqn", "m3-s0"],
        "label": ["PPO · lr 3e-4", "DQN · lr 1e-4", "PPO · model3"],
    })  # fmt: skip
    return FigureContext(iterations=iterations, latency=pd.DataFrame(), runs=runs_df, order={},
                         config_colors={}, configurations=configurations,
                         mixed_note={"training": "Warning: mixed fingerprints fp1, fp2"},
                         targets={"ppo-s0": 150.0, "dqn": 150.0})  # fmt: skip


def _draw(ctx: FigureContext, out: Path) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with keep_figures() as kept:
        png = learning_curves(ctx, out)
    assert png == out / "learning_curves.png" and png.stat().st_size > 0
    fig = kept["learning_curves"]
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def _rows(fig: Any) -> dict[str, list[Any]]:
    """Workload title -> its two panels (env steps, wall-clock)."""
    return {sf._suptitle.get_text(): sf.axes for sf in fig.subfigs}


def _band(ax: Any, color: Any) -> np.ndarray:
    """The vertices of the (training) band drawn in ``color`` on ``ax``."""
    bands = [c for c in ax.collections if np.allclose(c.get_facecolor()[0][:3], color[:3])
             and c.get_facecolor()[0][3] == pytest.approx(0.2)]  # fmt: skip
    assert len(bands) == 1
    return bands[0].get_paths()[0].vertices


def _line(ax: Any, label: str, ls: str = "-") -> Any:
    """The thick (mean) line of the configuration whose legend entry is ``label``."""
    color = _colors(ax)[label]
    [line] = [ln for ln in ax.get_lines() if ln.get_color() == color and ln.get_linestyle() == ls
              and ln.get_linewidth() > 1.0]  # fmt: skip
    return line


def _colors(ax: Any) -> dict[str, Any]:
    """Legend text -> colour of the lines in the legend of ``ax``'s row."""
    legend = ax.get_figure().axes[1].get_legend()  # the row's (subfigure's) right panel
    return {
        t.get_text(): h.get_color()
        for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
        if hasattr(h, "get_color")
    }


def test_learning_curves_band_is_the_t_interval_over_seeds(tmp_path: Path) -> None:
    fig = _draw(_tables(), tmp_path)
    rows = _rows(fig)
    assert list(rows) == [W1, W3]  # one panel pair per workload
    steps_ax, wall_ax = rows[W1]
    assert steps_ax.get_xlabel() == "env steps sampled"
    assert wall_ax.get_xlabel() == "wall-clock time (s)"
    assert steps_ax.get_ylabel().replace("\n", " ") == Y_LABEL
    ppo = _line(steps_ax, "PPO · lr 3e-4 (3 runs)")
    # On env steps every seed sampled the same steps: the grid is the points measured,
    # from iteration 2 (iteration 1 finished no episode) to 8.
    assert ppo.get_xdata().tolist() == [STEPS * i for i in range(2, ITERATIONS + 1)]
    at = 3 * STEPS  # iteration 3: returns 30, 33, 36
    assert ppo.get_ydata()[1] == pytest.approx(33.0)
    half = T_2 * 3.0 / math.sqrt(3)  # sd of (30, 33, 36) is 3
    verts = _band(steps_ax, ppo.get_color())
    ys = sorted(verts[np.isclose(verts[:, 0], at), 1])
    assert ys[0] == pytest.approx(33.0 - half) and ys[-1] == pytest.approx(33.0 + half)


def test_learning_curves_wall_clock_band_covers_only_what_every_seed_ran(tmp_path: Path) -> None:
    fig = _draw(_tables(), tmp_path)
    _, wall_ax = _rows(fig)[W1]
    ppo = _line(wall_ax, "PPO · lr 3e-4 (3 runs)")
    x = ppo.get_xdata()
    # seed k ran iteration i at 5 i + k s; its first return is at iteration 2 (10 + k s),
    # its last at 40 + k s: every seed has data from 12 s to 40 s only.
    assert x[0] == pytest.approx(12.0) and x[-1] == pytest.approx(40.0)
    # At 40 s: seed 0 is at iteration 8 (80), seed 1 at 7.8 (11 * 7.8), seed 2 at 7.6 (12 * 7.6).
    values = np.array([80.0, 11 * 7.8, 12 * 7.6])
    assert ppo.get_ydata()[-1] == pytest.approx(values.mean())
    half = T_2 * values.std(ddof=1) / math.sqrt(3)
    verts = _band(wall_ax, ppo.get_color())
    ys = sorted(verts[np.isclose(verts[:, 0], 40.0), 1])
    assert ys[0] == pytest.approx(values.mean() - half)
    assert ys[-1] == pytest.approx(values.mean() + half)
    # Every seed is drawn thin over its whole length, beyond the band.
    thin = [ln for ln in wall_ax.get_lines() if ln.get_color() == ppo.get_color()
            and ln.get_linewidth() < 1.0]  # fmt: skip
    assert sorted(ln.get_xdata()[-1] for ln in thin) == [40.0, 41.0, 42.0]


def test_learning_curves_single_run_eval_and_target(tmp_path: Path) -> None:
    fig = _draw(_tables(), tmp_path)
    rows = _rows(fig)
    for ax in rows[W1]:
        [target] = [ln for ln in ax.get_lines() if ln.get_label() == "target 150"]
        assert list(target.get_ydata()) == [150.0, 150.0]
        assert target.get_linestyle() == ":"
    for ax in rows[W3]:
        assert not [ln for ln in ax.get_lines() if ln.get_label().startswith("target")]
    steps_ax, wall_ax = rows[W1]
    dqn = _line(steps_ax, "DQN · lr 1e-4")
    # One run: its own points, warm-up iteration 2 included, no band.
    assert dqn.get_xdata().tolist() == [STEPS * i for i in range(1, ITERATIONS + 1)]
    assert dqn.get_ydata().tolist() == [4.0 * i for i in range(1, ITERATIONS + 1)]
    evaluation = _line(steps_ax, "DQN · lr 1e-4", ls="--")
    assert evaluation.get_marker() == "o"
    assert evaluation.get_xdata().tolist() == [4 * STEPS, 8 * STEPS]
    assert evaluation.get_ydata().tolist() == [60.0, 140.0]
    assert _line(wall_ax, "DQN · lr 1e-4", ls="--").get_xdata().tolist() == [28.0, 56.0]
    labels = [t.get_text() for t in wall_ax.get_legend().get_texts()]
    assert labels == ["DQN · lr 1e-4", "PPO · lr 3e-4 (3 runs)", "training return",
                      "greedy evaluation return", "one run", "95 % band over seeds",
                      "target 150"]  # fmt: skip


def test_learning_curves_title_legends_and_note_inside_and_apart(tmp_path: Path) -> None:
    fig = _draw(_tables(), tmp_path)
    renderer = fig.canvas.get_renderer()
    parts = {"title": fig._suptitle, "note": fig._supxlabel}
    for r, sf in enumerate(fig.subfigs):
        parts[f"row {r} title"] = sf._suptitle
        for c, ax in enumerate(sf.axes):
            parts[f"row {r} axes {c}"] = ax
        parts[f"row {r} legend"] = sf.axes[1].get_legend()
    assert fig._suptitle.get_text().startswith("Learning curves")
    assert fig._supxlabel.get_text().startswith("Warning")
    boxes = {name: a.get_window_extent(renderer) for name, a in parts.items()}
    whole = fig.bbox
    for name, b in boxes.items():
        assert b.x0 >= whole.x0 - 0.5 and b.y0 >= whole.y0 - 0.5, name
        assert b.x1 <= whole.x1 + 0.5 and b.y1 <= whole.y1 + 0.5, name
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert not box_a.overlaps(box_b), f"{a} overlaps {b}"


def test_learning_curves_fall_back_to_the_model_without_workloads(tmp_path: Path) -> None:
    ctx = _tables()
    ctx.runs = ctx.runs.drop(columns=["workload"])
    assert list(_rows(_draw(ctx, tmp_path))) == ["model1", "model3"]


def test_learning_curves_without_a_return_is_not_drawn(tmp_path: Path) -> None:
    ctx = _tables()
    ctx.iterations = ctx.iterations.assign(episode_return_mean=np.nan, eval_return_mean=np.nan)
    with pytest.raises(FigureNotApplicable, match="no training cell has a return"):
        learning_curves(ctx, tmp_path)
    ctx.iterations = pd.DataFrame()
    with pytest.raises(FigureNotApplicable, match="no completed training cells"):
        learning_curves(ctx, tmp_path)
    assert not list(tmp_path.iterdir())


def test_mean_curve_on_ragged_runs() -> None:
    short = (np.array([0.0, 1.0, 2.0]), np.array([0.0, 10.0, 20.0]))
    long = (np.array([0.5, 1.5, 2.5, 3.5]), np.array([5.0, 15.0, 25.0, 35.0]))
    assert common_grid([short, long]).tolist() == [0.5, 1.0, 1.5, 2.0]
    mc = mean_curve([short, long])
    assert mc is not None and mc.runs == 2
    # Both runs are 10 x: the mean is too and the runs agree, so the band is the mean.
    assert mc.mean.tolist() == pytest.approx([5.0, 10.0, 15.0, 20.0])
    assert mc.low.tolist() == pytest.approx(mc.mean.tolist())
    # NaN returns are left out; runs with no x in common have no mean.
    apart = (np.array([5.0, 6.0, np.nan]), np.array([1.0, np.nan, 3.0]))
    assert mean_curve([short, apart]) is None
    one = mean_curve([apart])
    assert one is not None and one.x.tolist() == [5.0] and np.isnan(one.low).all()
    many = (np.linspace(0, 2, 1000), np.linspace(0, 20, 1000))
    assert len(common_grid([short, many], points=50)) == 50
