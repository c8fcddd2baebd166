"""The report on a compression sweep (``experiment=compression``): the trade-off figure,
the per-policy table with the reference row, return differences with their intervals,
sizes and the fidelity verdict (vacuous included). Cells written by support.synthetic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from support import synthetic

from rlperf.report import build_report
from tests.conftest import NOT_BLANK_PNG_BYTES

#: backend -> (action ms, returns, size, gzip, sparsity, fidelity)
CELLS: dict[str, tuple[float, list[float], int | None, int | None, float | None, Any]] = {
    "rllib": (0.09, [500.0, 480.0, 500.0], 70_000, 60_000, None, None),
    "tflite_int8": (0.03, [500.0, 470.0, 500.0], 10_800, 6_000, 0.0,
                    {"verdict": "passed", "return_diff": -3.3, "return_diff_low": -17.7,
                     "return_diff_high": 11.0, "return_tie": True}),
    "tflite_prune90": (0.05, [200.0, 150.0, 180.0], 20_400, 4_000, 0.9,
                       {"verdict": "passed", "return_diff": -310.0, "return_diff_low": -370.0,
                        "return_diff_high": -250.0, "return_tie": False}),
    "tflite_qat": (0.03, [500.0, 480.0, 500.0], 8_300, 5_800, 0.01,
                   {"verdict": "vacuous", "return_diff": 0.0, "return_diff_low": 0.0,
                    "return_diff_high": 0.0, "return_tie": True, "saturates": True,
                    "reference": {"vacuous": True, "vacuous_reason": "near-constant"}}),
}  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("multirun") / "2026-12-01" / "12-00-00"
    specs = []
    for i, (backend, (ms, returns, size, gz, sparsity, fid)) in enumerate(CELLS.items()):
        cfg = synthetic.resolved_config(stage="edge", model="model1", gpu_layout="none",
                                        workers=0, backend=backend)  # fmt: skip
        steps, episodes = synthetic.inference_steps([ms] * 3, 100, seed=i, returns=returns)
        if fid is not None:
            fid = {"agreement": 0.99, "threshold": 0.9, "flagged": False, **fid}
        summary = synthetic.inference_summary(steps, episodes, "edge", backend, fid, size)
        summary.update(model_gzip_bytes=gz, memory={"peak_rss_mb": 80.0 + i})
        if sparsity is not None:
            summary["weights"] = {"sparsity": sparsity}
        if backend in ("tflite_qat", "tflite_prune90"):  # fine-tuned: what the fit kept
            summary["calibration"] = {"compression": {"holdout_loss_kept": 0.0123 * (i + 1),
                                                      "lr_chosen": 3e-4}}  # fmt: skip
        body = synthetic.fingerprint(cpu_model="Intel Xeon", cpu_count=2, gpus=())
        body["start_time"] = f"2026-12-01T12:0{i}:00+00:00"
        body["config"] = cfg
        specs.append(synthetic.CellSpec(cfg, synthetic.overrides_for(cfg), body, summary,
                                        steps=steps, episodes=episodes))  # fmt: skip
    synthetic.write_sweep(root, specs)
    return build_report([root], None, None, True)


def test_tradeoff_figure_and_table_per_policy(report) -> None:
    assert "compression_tradeoff" in report.figures
    assert report.figures["compression_tradeoff"].stat().st_size > NOT_BLANK_PNG_BYTES
    runs = report.runs.set_index("backend")
    assert runs.loc["tflite_prune90", "weight_sparsity"] == 0.9
    assert runs.loc["tflite_int8", "model_gzip_bytes"] == 6_000
    assert runs.loc["tflite_qat", "fidelity_verdict"] == "vacuous"
    text = Path(report.out / "report.md").read_text()
    head = text.index("| return diff [95% CI] |")
    table = text[text.rindex("### model1", 0, head) : text.index("\n\n", head)]
    # One table for the policy, the torch reference row (rllib) among the variants.
    lines = table.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("|---")) + 1 :]
    assert [line.split(" | ")[1] for line in body] == [
        "tflite_int8", "tflite_qat", "tflite_prune90", "rllib"
    ]  # fmt: skip
    assert "-310 [-370, -250]" in table and "-3.3 [-17.7, 11] tie" in table
    assert "+0 [0, 0] saturates" in table and "vacuous" in table
    # The fine-tuned variants' held-out distillation error and rate; none for PTQ or torch.
    assert runs.loc["tflite_prune90", "finetune_holdout_mse"] == pytest.approx(0.0369)
    assert "| distil MSE (lr) |" in table and "| 0.0369 (0.0003) |" in table
    assert "| 0.0492 (0.0003) |" in table and pd.isna(runs.loc["rllib", "finetune_lr"])


def test_vacuous_fidelity_is_a_finding(report) -> None:
    texts = [f.text for f in report.findings if f.kind == "fidelity"]
    assert any("is vacuous: near-constant" in t for t in texts), texts


def test_variant_returns_against_the_torch_policy(report) -> None:
    """The variants' episode returns against the torch policy's (the same seeded episodes):
    IQM with its interval and P(improvement) over the reference (rlperf.report.compare.returns)."""
    (rc,) = [r for r in report.sections["returns"] if r.family == "inference"]
    assert rc.unit == "episode" and rc.reference.endswith("rllib")
    table = rc.table.set_index("label")
    assert np.isnan(table.loc[rc.reference, "p_improvement"])
    others = table.drop(index=rc.reference)
    assert len(others) == 3 and others["p_improvement"].between(0, 1).all()
    assert (others["iqm_low"] <= others["iqm"]).all()
    assert (others["iqm"] <= others["iqm_high"]).all()


def test_quantized_memory_against_fp32_is_a_finding_with_its_interval(tmp_path: Path) -> None:
    """The study's claim "quantized models can use more memory" judged per policy: three
    runs of each variant; int8 planted 10 MB above fp32 (confirmed), dynamic within noise
    of it (not shown). The table carries the memory columns and, without RAPL, says the
    energy was not measured."""
    root = tmp_path / "multirun" / "2026-12-05" / "12-00-00"
    peak = {"tflite_fp32": 80.0, "tflite_int8": 90.0, "tflite_dynamic": 80.2}
    variant = {"tflite_fp32": "fp32", "tflite_int8": "int8", "tflite_dynamic": "dynamic"}
    noise = [0.0, 0.4, -0.3]
    specs = []
    for i, (backend, seed) in enumerate((b, s) for b in peak for s in range(3)):
        cfg = synthetic.resolved_config(stage="edge", model="model1", gpu_layout="none",
                                        workers=0, backend=backend, seed=seed)  # fmt: skip
        steps, episodes = synthetic.inference_steps([0.03] * 3, 100, seed=i, returns=[5.0] * 3)
        fid = {"agreement": 1.0, "threshold": 0.9, "flagged": False, "verdict": "passed"}
        summary = synthetic.inference_summary(steps, episodes, "edge", backend, fid, 10_000)
        summary.update(
            variant=variant[backend], threads=1, heads="policy", model_gzip_bytes=8_000,
            memory={"peak_rss_mb": peak[backend] + noise[seed], "model_rss_mb": 1.5},
            model_info={"tensor_bytes": {"constant": 9_000, "variable": 262}},
        )  # fmt: skip
        body = synthetic.fingerprint(cpu_model="Intel Xeon", cpu_count=2, gpus=())
        body["start_time"] = f"2026-12-05T12:{i:02d}:00+00:00"
        body["config"] = cfg
        specs.append(synthetic.CellSpec(cfg, synthetic.overrides_for(cfg), body, summary,
                                        steps=steps, episodes=episodes))  # fmt: skip
    synthetic.write_sweep(root, specs)
    report = build_report([root], None, None, True)
    (memory,) = [f for f in report.findings if f.kind == "memory"]
    assert "`tflite_int8` 1.125x [" in memory.text and "(more)" in memory.text
    assert "`tflite_dynamic` 1.00" in memory.text and "(no difference shown)" in memory.text
    assert "confirmed here: `tflite_int8` used more" in memory.text
    assert memory.headline.startswith("1.12x fp32's memory: `tflite_int8` used more")
    text = Path(report.out / "report.md").read_text()
    head = text.index("| model RSS MB | tensors B | CPU J / 1k actions |")
    assert "| 1.5 | 262 | not measured here |" in text[head : text.index("\n\n", head)]


def test_the_compression_study_table_and_its_four_claims(tmp_path: Path) -> None:
    """Edge cells of three trained SAC policies x five backends (``source.identity`` names
    the algorithm and env): one row per backend over the policies, the return difference
    as an IQM with its interval, and each of the study's claims judged on planted values:
    dynamic keeps the return best, int8 worst, int8 uses more memory, pruning shrinks the
    gzip size at the same speed."""
    root = tmp_path / "multirun" / "2026-12-05" / "13-00-00"
    #: backend -> (variant, return diff, action ms, gzip, peak RSS)
    planted = {
        "rllib": ("torch", None, 0.09, 60_000, 250.0),
        "tflite_fp32": ("fp32", 0.0, 0.006, 50_000, 80.0),
        "tflite_dynamic": ("dynamic", -1.0, 0.007, 15_000, 80.1),
        "tflite_int8": ("int8", -30.0, 0.010, 14_000, 90.0),
        "tflite_prune50": ("prune50", -10.0, 0.006, 30_000, 80.0),
    }
    specs, i = [], 0
    for policy in range(3):
        for backend, (variant, diff, ms, gz, peak) in planted.items():
            cfg = synthetic.resolved_config(stage="edge", model="mlp256", gpu_layout="none",
                                            workers=0, backend=backend, seed=policy)  # fmt: skip
            steps, episodes = synthetic.inference_steps([ms] * 3, 100, seed=i, returns=[5.0] * 3)
            fid = None
            if diff is not None:
                fid = {"agreement": 1.0, "threshold": 0.9, "flagged": False,
                       "verdict": "passed", "return_diff": diff + 0.5 * policy}  # fmt: skip
            summary = synthetic.inference_summary(steps, episodes, "edge", backend, fid, gz)
            summary.update(
                variant=variant, threads=1, heads="policy", model_gzip_bytes=gz,
                memory={"peak_rss_mb": peak + 0.2 * policy, "model_rss_mb": 2.0},
                source={"run": f"/train/{policy}", "identity": {
                    "model": "mlp256", "seed": policy, "algo": "sac",
                    "env_id": "HalfCheetah-v5"}},
            )  # fmt: skip
            body = synthetic.fingerprint(cpu_model="Intel Xeon", cpu_count=2, gpus=())
            body["start_time"] = f"2026-12-05T13:{i:02d}:00+00:00"
            body["config"] = cfg
            specs.append(synthetic.CellSpec(cfg, synthetic.overrides_for(cfg), body, summary,
                                            steps=steps, episodes=episodes))  # fmt: skip
            i += 1
    synthetic.write_sweep(root, specs)
    report = build_report([root], None, None, True)
    rows = {r.backend: r for r in report.sections["compression_study"]}
    assert set(rows) == set(planted) and all(r.policies == 3 for r in rows.values())
    int8 = rows["tflite_int8"]
    assert int8.statistic == "IQM" and int8.return_diff == pytest.approx(-29.5)
    assert int8.return_low <= int8.return_diff <= int8.return_high
    text = Path(report.out / "report.md").read_text()
    claims = text[text.index("### The study's claims, here") :].split("\n\n")[1]
    assert "claim 1 (dynamic PTQ keeps the return best) holds:" in claims
    assert "claim 2 (static PTQ keeps it worst) holds:" in claims
    assert "claim 3 (quantized uses more memory than fp32, peak RSS) holds for `tflite_int8`" in (
        claims
    )
    assert "claim 4 (pruning shrinks the model" in claims and "gzip 0.60x" in claims
    assert "energy not measured here" in claims
