"""``experiment=compression_mujoco_small`` end to end, as docs/compression.md#mujoco runs
it: PPO and SAC trained on HalfCheetah-v5 (float64 observations), the edge stage over the
training sweep (fp32 and per-feature int8; each judged against the torch policy on the
same episodes), and the report: the
compression table with the memory columns, the energy column ("not measured here" without
RAPL), the memory finding, and the study's table with its claims. CI-sized: one env of the
preset's two, one run per cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlperf.layout import SUMMARY_FILE
from tests.conftest import run_rlperf


@pytest.mark.slow
def test_compression_mujoco_small_end_to_end(tmp_path: Path) -> None:
    from rlperf.report import build_report

    train, edge = tmp_path / "train", tmp_path / "edge"
    proc = run_rlperf(["-m", "experiment=compression_mujoco_small", "env.id=HalfCheetah-v5",
                       f"hydra.sweep.dir={train}"], cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    trained = [json.loads((train / n / SUMMARY_FILE).read_text()) for n in ("0", "1")]
    assert all(s["status"] == "completed" for s in trained)
    protocol = trained[0]["env_protocol"]
    assert protocol["observation_cast"] == "float64 -> float32"
    assert protocol["simulator"]["frame_skip"] == 5
    # edge.isolate=false: each benchmark in its trial's process (no second TensorFlow import).
    proc = run_rlperf(["-m", "experiment=compression", f"run={train}", "edge.episodes=2",
                       "backend=tflite_fp32,tflite_int8", f"edge.cache_dir={tmp_path / 'c'}",
                       "edge.calibration_size=100", "edge.fidelity_observations=100",
                       "edge.isolate=false", f"hydra.sweep.dir={edge}"], cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = [json.loads(p.read_text()) for p in sorted(edge.glob(f"*/{SUMMARY_FILE}"))]
    assert len(cells) == 4 and all(s["status"] == "completed" for s in cells)
    int8 = [s for s in cells if s["backend"] == "tflite_int8"]
    assert all(s["model_info"]["input_normalization"]["shape"] == [17] for s in int8)
    assert all(s["model_info"]["tensor_bytes"]["variable"] > 0 for s in int8)
    report = build_report([train, edge], tmp_path / "report")
    text = report.markdown.read_text()
    head = text.index("| model RSS MB | tensors B | CPU J / 1k actions |")
    table = text[text.rindex("\n\n", 0, head) : text.index("\n\n", head)]
    rows = [r for r in table.splitlines() if r.startswith("| ") and "tflite_" in r]
    assert len(rows) == 4 and all("not measured here" in r for r in rows)
    (memory,) = [f for f in report.findings if f.kind == "memory"]
    assert "(one run)" in memory.text  # one run each: no interval, and it says so
    # The study's table: algorithm x env x backend over the trained policies, and its claims.
    rows = report.sections["compression_study"]
    assert sorted((r.algo, r.backend) for r in rows) == [
        (a, b) for a in ("ppo", "sac") for b in ("tflite_fp32", "tflite_int8")
    ]
    assert all(r.env == "HalfCheetah-v5" and r.policies == 1 for r in rows)
    assert "claim 3 (quantized uses more memory than fp32, peak RSS) not decided here" in text
