"""The report on rlperf's own result format: a tiny sweep written in the test.

The cells replay the 2021 study's measured iterations and per-episode
latencies (tests/data/thesis) through :mod:`support.synthetic` (tests/support), so the
numbers are real ones; a corrupt, a torn and a failed cell are added.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pandas as pd
import pytest
from support import synthetic

from rlperf.layout import (
    CELL_FILE,
    FINGERPRINT_FILE,
    LEVELS_FILE,
    METRICS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
)
from rlperf.report import build_report
from rlperf.report.stats.estimates import rank_with_ties
from rlperf.stats.intervals import across_runs, speedup
from tests.conftest import NOT_BLANK_PNG_BYTES, THESIS

ITERATIONS = 24


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("multirun") / "2026-12-01"
    train = synthetic.study_training_sweep(THESIS, root / "10-00-00", iterations=ITERATIONS)
    synthetic.study_inference_sweep(THESIS, root / "11-00-00", steps_per_episode=200)
    n = len(train)
    # A corrupt cell (config.yaml is not YAML), a cell killed mid-write (no summary,
    # torn last line) and a failed one.
    bad = root / "10-00-00" / str(n)
    (bad / ".hydra").mkdir(parents=True)
    (bad / ".hydra" / "config.yaml").write_text("stage: [train\nmodel: {")
    (bad / METRICS_FILE).write_text("iteration,iter_s\n1,2.0\n")
    torn = root / "10-00-00" / str(n + 1)
    src = train[0]
    torn.mkdir()
    (torn / ".hydra").mkdir()
    for f in ("config.yaml", "overrides.yaml"):
        text = (src / ".hydra" / f).read_text().replace("seed: 0", "seed: 7")
        (torn / ".hydra" / f).write_text(text)
    lines = (src / METRICS_FILE).read_text().splitlines(keepends=True)
    (torn / METRICS_FILE).write_text("".join(lines[:6]) + lines[6][:15])
    failed = root / "10-00-00" / str(n + 2)
    failed.mkdir()
    for item in (src / ".hydra").iterdir():
        (failed / ".hydra").mkdir(exist_ok=True)
        (failed / ".hydra" / item.name).write_text(item.read_text().replace("seed: 0", "seed: 8"))
    metrics = pd.read_csv(src / METRICS_FILE).head(4)
    metrics.to_csv(failed / METRICS_FILE, index=False)
    summary = synthetic.train_summary(metrics, "model1", status="failed")
    (failed / SUMMARY_FILE).write_text(json.dumps(summary))
    fp = json.loads((src / FINGERPRINT_FILE).read_text())
    fp["start_time"] = "2026-12-03T09:00:00+00:00"  # a run of its own (same start = same run)
    (failed / FINGERPRINT_FILE).write_text(json.dumps(fp))
    return root


@pytest.fixture(scope="module")
def report(sweep: Path):
    messages: list[str] = []
    res = build_report([sweep], None, None, False, progress=messages.append)
    res.messages = messages  # type: ignore[attr-defined]
    return res


def _train_cells(sweep: Path) -> list[Path]:
    return sorted(p for p in (sweep / "10-00-00").iterdir() if (p / SUMMARY_FILE).is_file())


def test_runs_table_has_one_row_per_cell(sweep, report):
    runs = pd.read_csv(report.out / "runs.csv")
    assert report.out == sweep / "report"
    n_train = len(list((sweep / "10-00-00").iterdir())) - 1  # minus multirun.yaml
    n_infer = len(list((sweep / "11-00-00").iterdir())) - 1
    assert len(runs) == n_train + n_infer - 1  # the corrupt cell is skipped
    assert runs["cell"].is_unique and runs["label"].is_unique
    assert not runs["label"].str.contains(r"[0-9a-f]{8}").any()  # values, not hashes
    assert set(runs["status"]) == {"completed", "partial", "failed"}
    # Parquet holds the same table.
    pq = pd.read_parquet(report.out / "runs.parquet")
    assert pq.shape == runs.shape and list(pq["cell"]) == list(runs["cell"])


def test_summary_metrics_agree_with_the_cells_own_summary(sweep, report):
    runs = report.runs.set_index("cell")
    for cell in _train_cells(sweep):
        summary = json.loads((cell / SUMMARY_FILE).read_text())
        if summary["status"] != "completed":
            continue
        row = runs.loc[f"2026-12-01/10-00-00/{cell.name}"]
        assert row["iter_s_mean"] == pytest.approx(summary["metrics"]["iter_s"]["mean"])
        assert row["iterations"] == ITERATIONS
        assert row["warmup_iterations"] == len(summary["warmup"]["iterations"])


def test_iterations_and_latency_tables(sweep, report):
    it = pd.read_csv(report.out / "iterations.csv")
    expected = sum(len(pd.read_csv(c / METRICS_FILE)) for c in _train_cells(sweep))
    assert len(it) == expected + 5  # + the 5 complete rows of the torn cell
    assert it.groupby("cell")["iteration"].apply(lambda s: s.is_monotonic_increasing).all()
    lat = pd.read_parquet(report.out / "latency.parquet")
    steps = sum(len(pd.read_csv(c / STEPS_FILE)) for c in (sweep / "11-00-00").iterdir()
                if c.is_dir())  # fmt: skip
    assert len(lat) == steps
    assert lat["excluded"].eq("warmup").sum() == 20 * 4


def test_partial_and_corrupt_cells_are_reported_not_fatal(report):
    reasons = {s.path.name: s.reason for s in report.skipped}
    assert len(reasons) == 1 and "cannot parse YAML" in next(iter(reasons.values()))
    runs = report.runs.set_index("cell")
    partial = runs[runs["status"] == "partial"].iloc[0]
    assert partial["iterations"] == 5 and pd.isna(partial["rank_in_workload"])
    assert "last line incomplete" in partial["notes"]
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert "worker died" in failed["notes"] and pd.isna(failed["objective_value"])


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_every_figure_is_produced(report):
    # The study's sweep has two worker counts per layout: no curve to fit a law to.
    assert set(report.figures_skipped) == {"scaling", "env_throughput"}
    assert report.figures_skipped["scaling"].startswith("no count (workers, ")
    assert report.figures_skipped["env_throughput"] == "no completed stage=env cells"
    assert set(report.figures) == {
        "phase_times",
        "phase_breakdown",
        "utilisation",
        "iter_time_vs_workers",
        "intervals",
        "learning_curves",
        "returns_1",  # training returns on Pong (rlperf.report.compare.returns)
        "returns_2",  # the edge variants' episode returns
        "gpu_power",
        "latency",
        "fidelity_latency",
        "compression_tradeoff",
    }
    for png in report.figures.values():
        width, height = _png_size(png)
        assert width > 500 and height > 300
        assert png.stat().st_size > NOT_BLANK_PNG_BYTES
        svg = png.with_suffix(".svg")
        assert svg.stat().st_size > 20_000 and b"<svg" in svg.read_bytes()[:500]


def test_findings_name_existing_cells(report):
    cells = set(report.runs["cell"])
    assert len(report.findings) >= 4
    for f in report.findings:
        assert f.cells and set(f.cells) <= cells
        assert f"`{f.cells[0]}`" in f.text
    runs = report.runs[report.runs["status"] == "completed"]
    for f in report.findings:
        if f.kind != "fastest":
            continue
        same = runs[(runs["family"] == f.family) & (runs["workload"] == f.model)]
        assert f.cells[0] == same.loc[same["objective_value"].idxmin(), "cell"]
    text = " ".join(f.text for f in report.findings)
    assert "Training, model1: fastest configuration is `gpu0_driver · 8 workers" in text
    assert "Inference, model1: fastest configuration is `edgetpu`" in text


def test_report_files(report):
    md = report.markdown.read_text()
    html = report.html.read_text()
    for needle in ("## Findings", "## Methods", "**Warm-up.**", "**Excluded.**",
                   "**Concurrency.**", "**Fingerprints.**", "ran one at a time",
                   "max_concurrent_trials=1", "### model1",
                   "ran them with max_concurrent_trials=1 (one cell at a time)"):  # fmt: skip
        assert needle in md
    figures = md[md.index("## Figures") :]
    assert len(re.findall(r"!\[[^]]*\]\(figures/\w+\.png\)", figures)) == 10
    # Each answer shows its own figure (its comparison set only), at the top.
    answers = md[md.index("## Answers") : md.index("## Findings")]
    shown = len(re.findall(r"!\[[^]]*\]\(figures/\w+\.png\)", answers))
    assert shown >= 2
    returns = md[md.index("## Returns") : md.index("\n## Training\n")]
    assert len(re.findall(r"!\[[^]]*\]\(figures/returns_\d\.png\)", returns)) == 2
    assert html.count("src='data:image/png;base64,") == 10 + shown + 2
    assert "figures/" not in re.sub(r"<p>Tables:.*?</p>", "", html)
    assert "Warning" not in md  # one machine, one software stack
    assert "read 16/16 cells (1 skipped)" in report.messages  # progress while reading


def test_baseline_option(sweep, tmp_path):
    res = build_report([sweep / "10-00-00"], tmp_path, "gpu_layout=gpu0,cpu_affinity=pinned",
                       figures=False)  # fmt: skip
    runs = res.runs.set_index("label")
    assert runs.loc["model1 · gpu0 · 8 workers · pinned", "speedup"] == pytest.approx(1.0)
    assert runs.loc["model1 · no GPU · 8 workers · all CPUs", "speedup"] < 0.05
    assert res.analyses["training"].baselines == {
        "model1": runs.loc["model1 · gpu0 · 8 workers · pinned", "cell"]
    }  # the comparison sets are the models: nothing else differs between them
    # model3 / model4 have no pinned cell: no baseline, no speedups there.
    assert runs.loc[runs["model"] == "model3", "speedup"].isna().all()


def test_ranks_and_ties():
    a = across_runs([10.0, 10.2, 9.8, 10.1, 9.9])
    b = across_runs([10.1, 10.3, 9.9, 10.2, 10.0])  # 1 % slower, within the noise: tie
    c = across_runs([11.0, 11.2, 10.8, 11.1, 10.9])  # clearly slower
    assert rank_with_ties({"a": a, "b": b, "c": c}) == {"a": 1, "b": 1, "c": 3}
    sp = speedup(across_runs([2.0, 2.1, 1.9, 2.0]), across_runs([1.0, 1.05, 0.95, 1.0]))
    assert sp.value == pytest.approx(2.0, rel=0.01) and sp.low > 1.8 and sp.high < 2.2


def test_broken_cells_never_break_the_report(tmp_path):
    root = tmp_path / "sweep"
    cfg = synthetic.resolved_config()
    fp = synthetic.fingerprint()
    header_only = synthetic.write_cell(root / "0", synthetic.CellSpec(cfg, [], fp, None))
    (header_only / METRICS_FILE).write_text(",".join(synthetic.METRIC_COLUMNS) + "\n")
    bare = synthetic.write_cell(root / "1", synthetic.CellSpec({"seed": 3}, ["+foo=bar"], None))
    (bare / METRICS_FILE).write_text("iteration,iter_s,episode_return_mean\n1,2,\n2,2.1,-20\n")
    not_a_map = synthetic.write_cell(root / "2", synthetic.CellSpec(cfg, [], None, {}))
    (not_a_map / ".hydra" / "config.yaml").write_text("- a\n- b\n")
    binary = synthetic.write_cell(root / "3", synthetic.CellSpec(cfg, [], None, {}))
    (binary / METRICS_FILE).write_bytes(b"\x00\xff\xfe\x00\n\x01,\x02\n")
    rollout = synthetic.resolved_config(stage="rollout")
    empty_steps = synthetic.write_cell(root / "4", synthetic.CellSpec(rollout, [], None, {}))
    (empty_steps / STEPS_FILE).write_text("episode,step,excluded,forward_ms,action_ms\n")
    (root / "5" / ".hydra").mkdir(parents=True)
    (root / "5" / ".hydra" / "config.yaml").write_text("stage: train\n")
    # Launcher states (docs/sweeps.md): skipped at pre-flight, and not started yet.
    skipped = synthetic.write_cell(
        root / "6",
        synthetic.CellSpec(
            cfg,
            [],
            None,
            {"status": "skipped", "stage": "train", "error": "gpu_layout asks for GPU(s) [0]"},
        ),
    )
    (skipped / CELL_FILE).write_text(json.dumps({"status": "skipped", "concurrent_cells": 1}))
    pending = synthetic.write_cell(root / "7", synthetic.CellSpec(cfg, [], None, None))
    (pending / CELL_FILE).write_text(json.dumps({"status": "pending", "concurrent_cells": 1}))

    res = build_report([root], tmp_path / "out", figures=True)
    reasons = {s.path.name: s.reason for s in res.skipped}
    assert reasons["2"] == ".hydra/config.yaml: not a mapping"
    assert reasons["3"].startswith("metrics.csv: cannot parse CSV")
    assert reasons["5"].startswith("no result file")
    runs = res.runs.set_index("cell")
    assert runs.loc["sweep/0", "iterations"] == 0
    assert "metrics.csv has no rows yet" in runs.loc["sweep/0", "notes"]
    assert runs.loc["sweep/1", "label"] == "sweep/1"  # no model, no axes: named by its folder
    assert runs.loc["sweep/4", "status"] == "partial"
    assert "steps.csv has no rows" in runs.loc["sweep/4", "notes"]
    assert runs.loc["sweep/6", "status"] == "skipped"
    assert "gpu_layout asks for GPU(s) [0]" in runs.loc["sweep/6", "notes"]
    assert runs.loc["sweep/7", "status"] == "pending"
    assert set(reasons) == {"2", "3", "5"}
    # No cell has data to plot or rank: the report says so instead of failing.
    assert res.figures == {} and "no completed training cells" in res.figures_skipped["phase_times"]
    assert (tmp_path / "out" / "report.html").stat().st_size > 1000


@pytest.mark.parametrize("workers", [4, {"num_env_runners": 4}])
def test_workers_axis_as_value_or_group(tmp_path, workers):
    from rlperf.report.read.discover import CellRef
    from rlperf.report.read.load import load_rlperf_cell

    cfg = synthetic.resolved_config()
    cfg["workers"] = workers
    metrics = pd.DataFrame({"iteration": [1, 2], "iter_s": [1.0, 1.1], "warmup": [1, 0]})
    synthetic.write_cell(tmp_path, synthetic.CellSpec(cfg, ["workers=4"], None, None, metrics))
    cell = load_rlperf_cell(CellRef(tmp_path, "rlperf", "c", "g"))
    assert cell.axes["workers"] == 4 and "workers" not in cell.leaves
    # rlperf 0.1 files flag warm-up in a boolean `warmup` column (CsvLog wrote 1/0).
    assert cell.iterations["excluded"].tolist() == ["warmup", ""]
    assert cell.status == "partial"


def test_all_empty_excluded_column_keeps_every_row(tmp_path):
    """A run without warm-up writes an `excluded` column pandas reads as all-NaN floats."""
    import warnings

    from rlperf.report.read.cells import included
    from rlperf.report.read.discover import CellRef
    from rlperf.report.read.load import load_rlperf_cell

    cfg = synthetic.resolved_config()
    metrics = pd.DataFrame({"iteration": [1, 2], "iter_s": [1.0, 1.1], "excluded": ["", ""]})
    synthetic.write_cell(tmp_path, synthetic.CellSpec(cfg, [], None, None, metrics))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' fill-value deprecations must not hit us
        cell = load_rlperf_cell(CellRef(tmp_path, "rlperf", "c", "g"))
    assert cell.iterations["excluded"].tolist() == ["", ""]
    assert len(included(cell.iterations)) == 2


def test_serve_cell_levels_are_read_tabled_and_drawn(tmp_path):
    """A serve job folder's levels.csv is read with the cell (rlperf.report.read.load), written as
    serve_levels / serve_max_rate, drawn, and the max rate is the one summary.json names."""
    cfg = synthetic.resolved_config(stage="serve")
    levels = pd.DataFrame({
        "loop": ["closed", "open", "open", "open"], "phase": ["load"] * 4,
        "offered_rps": [None, 10.0, 20.0, 40.0], "on_schedule": [True, True, True, False],
        "excluded": ["", "", "", ""], "model_busy_share": [0.1, 0.2, 0.4, 0.9],
        "p50_ms": [1.0, 1.1, 1.3, 9.0], "p50_lo_ms": [0.9, 1.0, 1.2, 8.0],
        "p50_hi_ms": [1.1, 1.2, 1.4, 10.0], "p99_ms": [2.0, 2.2, 3.0, 50.0],
        "p99_lo_ms": [1.8, 2.0, 2.8, 40.0], "p99_hi_ms": [2.2, 2.4, 3.3, float("inf")],
    })  # fmt: skip
    summary = {
        "status": "completed", "stage": "serve",
        "max_rate_under_slo": {"slo_ms": 5.0, "max_rate_rps": 20.0, "bounded": True},
        "baseline": {"inprocess_p50_ms": 0.5, "http_p50_ms": 1.0, "serve_added_http_ms": 0.5},
        "serve": {"replicas": 1, "max_batch_size": 1, "transport": "http"},
    }  # fmt: skip
    cell = tmp_path / "runs" / "0"
    synthetic.write_cell(cell, synthetic.CellSpec(cfg, [], None, summary))
    levels.to_csv(cell / LEVELS_FILE, index=False)
    res = build_report([tmp_path / "runs"], tmp_path / "out")
    assert len(res.serve.levels) == 4 and res.serve.levels["slo_ms"].eq(5.0).all()
    row = res.serve.max_rate.iloc[0]
    assert (row["max_rate_rps"], row["model_busy_share_at_max"]) == (20.0, 0.4)
    assert {"serve_levels.csv", "serve_max_rate.csv"} <= {p.name for p in res.files}
    assert res.figures["serve_latency_vs_load"].stat().st_size > NOT_BLANK_PNG_BYTES
    assert "highest Poisson rate meeting the p99 bound of 5 ms is 20 req/s" in (
        res.markdown.read_text()
    )


def test_a_failing_figure_is_listed_and_the_others_are_drawn(tmp_path, monkeypatch):
    """The registry draws each figure on its own: one that raises is listed with its error,
    one with nothing to show with its reason, and the rest are still drawn."""
    from rlperf.errors import FigureNotApplicable
    from rlperf.report.figures import registry

    def broken(ctx, out):
        raise ValueError("bad data")

    def empty(ctx, out):
        raise FigureNotApplicable("nothing to show")

    def fine(ctx, out):
        (out / "fine.png").write_bytes(b"png")
        return out / "fine.png"

    stubs = {"broken": (broken, ""), "empty": (empty, ""), "fine": (fine, "")}
    monkeypatch.setattr(registry, "FIGURES", stubs)
    ctx = registry.FigureContext(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {}, {})
    drawn, skipped = registry.draw_all(ctx, tmp_path / "figures")
    assert drawn == {"fine": tmp_path / "figures" / "fine.png"}
    assert skipped == {"broken": "failed: ValueError: bad data", "empty": "nothing to show"}
