"""Conversion, fidelity and the edge job, end to end (real TensorFlow, LiteRT, Atari).

The export of the study's models and its check are in tests/tflite/test_export.py.

Thresholds held here (documented in rlperf/edge/fidelity.py and docs/edge.md):
fp32 agreement 1.0 and max logit error <= edge.export_tolerance (relative above
|logit| 1); fp16 agreement >= 0.99; dynamic-range and int8 agreement >= 0.9.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.one_run import ONE_RUN

from rlperf.errors import EdgeTpuModelOnCpuError, SkipCell
from rlperf.layout import (
    CHECKPOINT_DIR,
    EPISODES_FILE,
    POLICY_FILE,
    PROBE_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
)
from tests.conftest import DATA
from tests.edge.conftest import run_edge

pytestmark = pytest.mark.slow

STUB_SOURCE = DATA / "edgetpu_stub.c"
TOL = 1e-4


def _frames(dim: int, count: int, seed: int) -> np.ndarray:
    from rlperf.tflite.calibration import collect_observations

    return collect_observations({"dim": dim, "max_episode_steps": 120}, count, seed)[0]


# --------------------------------------------------------------------------
# A small trained policy, its variants, and the edge job
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_run(small_policy_run: dict[str, Any]) -> dict[str, Any]:
    return small_policy_run  # conftest.py: shared with the serve tests


@pytest.fixture(scope="module")
def variant_sets(trained_run: dict[str, Any]) -> dict[str, Any]:
    from rlperf.models.policy_file import load_policy
    from rlperf.tflite.calibration import collect_observations

    net = load_policy(trained_run["policy"])
    env = {"dim": 42, "max_episode_steps": 60}
    fidelity, _ = collect_observations(env, 200, seed=1)
    calib, removed = collect_observations(env, 150, seed=0, exclude=fidelity)
    return {"net": net, "fidelity": fidelity, "calibration": calib, "removed": removed}


def test_variant_thresholds_on_trained_policy(variant_sets: dict[str, Any], tmp_path) -> None:
    from rlperf.edge.fidelity import logit_fidelity
    from rlperf.tflite.convert import convert_keras
    from rlperf.tflite.export import export_policy, torch_outputs
    from rlperf.tflite.runtime import TfliteActor

    net, obs, calib = variant_sets["net"], variant_sets["fidelity"], variant_sets["calibration"]
    fid_keys = {o.tobytes() for o in obs}
    assert not any(c.tobytes() in fid_keys for c in calib)  # disjoint sets
    model, check = export_policy(net, obs, "policy", TOL)
    ref = torch_outputs(net, obs)[0]
    assert len(set(ref.argmax(1).tolist())) >= 2  # a policy that actually decides
    results = {}
    for variant, io in [("fp32", "uint8"), ("fp16", "uint8"), ("dynamic", "uint8"),
                        ("int8", "uint8"), ("int8", "int8")]:  # fmt: skip
        path = tmp_path / f"{variant}-{io}.tflite"
        path.write_bytes(convert_keras(model, variant, calib, io))
        actor = TfliteActor(path, 6)
        results[(variant, io)] = (actor, actor.logits(obs))
    scale = max(1.0, float(np.abs(ref).max()))
    fp32 = logit_fidelity(results[("fp32", "uint8")][1], ref, 0.9)
    assert fp32["agreement"] == 1.0 and fp32["max_abs_logit_err"] <= TOL * scale
    fp16 = logit_fidelity(results[("fp16", "uint8")][1], ref, 0.99)
    assert not fp16["flagged"] and fp16["max_abs_logit_err"] < 1e-2 * scale
    for key in [("dynamic", "uint8"), ("int8", "uint8")]:
        report = logit_fidelity(results[key][1], ref, 0.9)
        assert not report["flagged"], (key, report)
        assert report["mean_abs_logit_err"] < 0.05 * scale
    # uint8 frames are fed losslessly: scale 1, zero point 0 (-128 for int8 I/O) ...
    u8_actor, u8_logits = results[("int8", "uint8")]
    i8_actor, i8_logits = results[("int8", "int8")]
    assert (u8_actor.input.dtype, u8_actor.input.scale, u8_actor.input.zero_point) == (
        "uint8", 1.0, 0)  # fmt: skip
    assert (i8_actor.input.dtype, i8_actor.input.scale, i8_actor.input.zero_point) == (
        "int8", 1.0, -128)  # fmt: skip
    # ... so both interfaces compute the same integers; int8 I/O drops the QUANTIZE ops.
    np.testing.assert_allclose(u8_logits, i8_logits, atol=1e-6)
    assert u8_actor.delegate.cpu_ops == {"QUANTIZE": 2}
    assert i8_actor.delegate.cpu_ops == {} and i8_actor.delegate.status == "full"


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edge-cache")


def _job_overrides(run: dict[str, Any], cache: Path, *extra: str) -> list[str]:
    return [
        f"run={run['path']}",
        f"edge.cache_dir={cache}",
        "edge.episodes=2",
        "edge.warmup_steps=10",
        "edge.calibration_size=120",
        "edge.fidelity_observations=150",
        *extra,
    ]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_job_int8_then_other_backends_reuse_the_export(
    trained_run, shared_cache, compose_edge, tmp_path
) -> None:
    out = tmp_path / "int8"
    s = run_edge(
        compose_edge(*_job_overrides(trained_run, shared_cache, "backend=tflite_int8")), out
    )
    assert s["backend"] == "tflite_int8" and s["variant"] == "int8" and s["heads"] == "policy"
    # Everything was built once: fidelity set, calibration set, export, four variants.
    assert len(s["cache"]["built"]) == 7 and s["cache"]["reused"] == []
    assert s["export"]["passed"] and s["export"]["agreement"] == 1.0
    assert s["calibration"]["count"] == 120 and s["calibration"]["pixel_max"] == 236
    # edge.int8_io=auto: int8 I/O on CPU, a raw frame fed with its top bit flipped.
    assert (s["input"]["dtype"], s["input"]["scale"], s["input"]["zero_point"]) == (
        "int8", 1.0, -128,
    )  # fmt: skip
    # Lossless once flipped; raw bytes written unflipped (as the study fed them) are 128 off.
    assert s["input"]["lossless"] and s["input"]["raw_bytes_max_err"] == 128.0
    assert s["input"]["quantized_max_err"] == 0.0
    fid = s["fidelity"]
    assert fid["observations"] == 150 and fid["agreement"] >= 0.9 and not fid["flagged"]
    assert fid["episodes_compared"] == 2 and len(fid["reference_returns"]) == 2
    assert s["episodes"]["count"] == 2 and s["episodes"]["length_mean"] == 60.0
    steps = _csv(out / STEPS_FILE)
    assert len(steps) == 120 == s["steps"]
    # The benchmark's energy per 1 000 actions: the CPU's where RAPL was read.
    assert s["energy"]["actions"] == 120
    measured = (s.get("cpu_energy") or {}).get("measured", False)  # none: telemetry off
    assert ("cpu_energy_per_1k_actions_j" in s["energy"]) == measured
    assert sum(r["excluded"] == "warmup" for r in steps) == 10
    assert s["latency"]["forward_ms"]["count"] == 110
    lat = s["latency"]
    assert 0 < lat["forward_ms"]["p50"] <= lat["action_ms"]["p50"]
    assert [int(r["length"]) for r in _csv(out / EPISODES_FILE)] == [60, 60]
    # int8 I/O: no QUANTIZE ops at the graph's ends, XNNPACK runs every op.
    assert s["delegate"]["status"] == "full" and s["delegate"]["cpu_ops"] == {}
    assert s["delegate"]["threads"] == 1
    assert 0 < s["memory"]["model_rss_mb"] < s["memory"]["peak_rss_mb"] < 1500
    copied = out / s["model_file"]
    assert copied.stat().st_size == s["model_size_bytes"]

    out2 = tmp_path / "fp32"
    cfg = compose_edge(*_job_overrides(trained_run, shared_cache, "backend=tflite_fp32"))
    s2 = run_edge(cfg, out2)
    assert s2["cache"]["built"] == [] and "export-policy.json" in s2["cache"]["reused"]
    assert "export_s" not in s2["timings_s"]
    assert s2["fidelity"]["agreement"] == 1.0
    assert s2["fidelity"]["max_abs_logit_err"] <= TOL * max(1, fid["reference_logit_range"])
    assert s2["delegate"]["status"] == "full"
    # Same seeded episodes, and fp32 acts exactly like torch: same returns.
    assert s2["fidelity"]["return_diff"] == 0.0
    assert s2["fidelity"]["reference_returns"] == fid["reference_returns"]

    s3 = run_edge(
        compose_edge(*_job_overrides(trained_run, shared_cache, "backend=rllib", "edge.threads=1")),
        tmp_path / "rllib",
    )
    assert s3["variant"] == "torch" and s3["fidelity"] is None
    # The torch cell played the same episodes the reference returns came from.
    assert [r for r in s3["reference_returns"]] == fid["reference_returns"]
    assert s3["model_size_bytes"] == Path(trained_run["policy"]).stat().st_size


def test_job_flags_a_variant_that_acts_differently(
    trained_run, shared_cache, compose_edge, tmp_path
) -> None:
    """A .tflite of another policy, checked against the trained one, is flagged."""
    import torch
    from support.edge_kit import SMALL_MODEL

    from rlperf.models.vision_net import VisionNet
    from rlperf.tflite.convert import convert_keras
    from rlperf.tflite.export import build_keras_policy

    torch.manual_seed(123)
    other = VisionNet((42, 42, 4), 6, SMALL_MODEL["conv_filters"]).eval()
    with torch.no_grad():
        other.pi_logits.bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 5.0]))
    wrong = tmp_path / "wrong-fp32.tflite"
    wrong.write_bytes(convert_keras(build_keras_policy(other), "fp32"))
    cfg = compose_edge(
        *_job_overrides(trained_run, shared_cache, "backend=tflite_fp32"),
        f"model_path={wrong}",
    )
    s = run_edge(cfg, tmp_path / "out")
    assert s["fidelity"]["flagged"]
    assert s["fidelity"]["agreement"] < 0.9
    assert "below edge.fidelity_threshold=0.9" in s["fidelity"]["flag_reason"]
    assert s["fidelity"]["action_histogram"][5] == 150  # the other policy always picks 5


def test_job_benchmarks_the_study_file(compose_edge, tmp_path) -> None:
    from support.edge_kit import study_reference_file

    path = study_reference_file("exported_models/model1_quant.tflite")
    twin = study_reference_file("exported_models/model1_quant_edgetpu.tflite")
    if path is None or twin is None:
        pytest.skip("the study's reference files are absent")
    cfg = compose_edge(
        f"model_path={path}",
        f"edge.cache_dir={tmp_path / 'cache'}",
        "env.max_episode_steps=40",
        "edge.episodes=1",
        "edge.warmup_steps=5",
    )
    s = run_edge(cfg, tmp_path / "out")  # backend=rllib (default): picked from the file
    assert s["backend"] == "tflite_int8" and s["variant"] == "int8"
    assert s["input"]["scale"] == pytest.approx(236 / 255, abs=1e-6)
    assert not s["input"]["lossless"]
    assert s["fidelity"] is None and s["export"] is None  # no source policy to compare with
    assert s["model_size_bytes"] == path.stat().st_size
    assert s["episodes"]["count"] == 1 and s["steps"] == 40
    assert s["env"]["dim"] == 84
    with pytest.raises(EdgeTpuModelOnCpuError, match="compiled for the Edge TPU"):
        run_edge(
            compose_edge(
                f"model_path={twin}",
                "backend=tflite_int8",
            ),
            tmp_path / "refused",
        )


def test_edgetpu_cell_skipped_without_runtime(trained_run, compose_edge, tmp_path) -> None:
    cfg = compose_edge(
        *_job_overrides(trained_run, tmp_path / "cache", "backend=edgetpu"),
        f"edge.edgetpu_library={tmp_path / 'libedgetpu.so.1'}",
    )
    with pytest.raises(SkipCell, match="not found") as info:
        run_edge(cfg, tmp_path / "out")
    assert "apt-get install libedgetpu1-std edgetpu-compiler" in str(info.value)
    # Skipped before anything was built.
    assert not any((tmp_path / "cache").rglob("*.tflite"))


def test_edgetpu_cell_with_stub_runtime_and_fake_compiler(
    trained_run, shared_cache, compose_edge, tmp_path, monkeypatch
) -> None:
    """The whole edgetpu path without hardware: the delegate that takes nothing is reported."""
    from support.edge_kit import build_stub_runtime, install_fake_compiler

    stub = build_stub_runtime(STUB_SOURCE, tmp_path / "stub")
    if stub is None:
        pytest.skip("no C compiler to build the Edge TPU stub")
    log = "Edge TPU Compiler version 16.0.384591198\nModel compiled successfully in 9 ms.\n"
    install_fake_compiler(tmp_path / "bin", log + "Number of Edge TPU subgraphs: 1\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EDGETPU_STUB_MODE", "fail")
    cfg = compose_edge(
        *_job_overrides(trained_run, shared_cache, "backend=edgetpu"),
        f"edge.edgetpu_library={stub}",
    )
    with pytest.raises(SkipCell, match="loaded but the delegate could not be created"):
        run_edge(cfg, tmp_path / "fail")
    monkeypatch.setenv("EDGETPU_STUB_MODE", "noop")
    s = run_edge(cfg, tmp_path / "noop")
    assert s["backend"] == "edgetpu"
    assert s["edgetpu"]["compiler"]["subgraphs"] == 1
    assert s["edgetpu"]["compiler"]["version"] == "16.0.384591198"
    assert s["delegate"]["edgetpu_status"] == "none"  # never reported as running on the TPU
    assert "Edge TPU delegate took no op" in s["delegate"]["note"]
    assert (tmp_path / "noop" / "edgetpu_compiler.txt").read_text().startswith("Edge TPU")
    assert any(n.endswith("_edgetpu.tflite") for n in s["cache"]["built"])


def test_edgetpu_compiles_the_chosen_int8_variant(
    trained_run, shared_cache, compose_edge, tmp_path, monkeypatch
) -> None:
    """``edge.edgetpu_source=tflite_prune75_int8``: the pruned int8 model is what the
    compiler gets (a fake compiler and a stub runtime: no hardware here)."""
    from support.edge_kit import build_stub_runtime, install_fake_compiler

    stub = build_stub_runtime(STUB_SOURCE, tmp_path / "stub")
    if stub is None:
        pytest.skip("no C compiler to build the Edge TPU stub")
    install_fake_compiler(tmp_path / "bin", "Edge TPU Compiler version 16.0.384591198\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EDGETPU_STUB_MODE", "noop")
    cfg = compose_edge(
        *_job_overrides(trained_run, shared_cache, "backend=edgetpu"),
        "edge.edgetpu_source=tflite_prune75_int8", "edge.finetune_steps=20",
        f"edge.edgetpu_library={stub}",
    )  # fmt: skip
    s = run_edge(cfg, tmp_path / "pruned")
    assert s["edgetpu"]["source"] == "tflite_prune75_int8"
    compiled = [n for n in s["cache"]["built"] if n.endswith("_edgetpu.tflite")]
    assert len(compiled) == 1 and "prune75" in compiled[0], s["cache"]["built"]
    # The fake compiler copies its input: the file benchmarked is the pruned int8 model.
    assert s["weights"]["sparsity"] == pytest.approx(0.75, abs=0.02)


def test_sweep_through_entry_point_reuses_cache(trained_run, tmp_path) -> None:
    """``rlperf -m stage=edge run=... backend=a,b``: the second cell reuses the first's export."""
    sweep = tmp_path / "sweep"
    cmd = [
        sys.executable, "-m", "rlperf", "-m", ONE_RUN, "stage=edge", f"run={trained_run['path']}",
        "backend=tflite_int8,tflite_dynamic", f"edge.cache_dir={tmp_path / 'cache'}",
        "edge.episodes=1", "edge.warmup_steps=5", "edge.calibration_size=60",
        "edge.fidelity_observations=60", "env.max_episode_steps=30", "telemetry.enabled=false",
        f"hydra.sweep.dir={sweep}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = json.loads((sweep / "0" / SUMMARY_FILE).read_text())
    second = json.loads((sweep / "1" / SUMMARY_FILE).read_text())
    assert first["status"] == second["status"] == "completed"
    assert (first["backend"], second["backend"]) == ("tflite_int8", "tflite_dynamic")
    # One cell (the first, with the launcher's default of one cell at a time) built
    # every variant; the other reused them all.
    builder, reuser = (first, second) if first["cache"]["built"] else (second, first)
    assert {"policy-fp32.tflite", "policy-dynamic.tflite"} <= set(builder["cache"]["built"])
    assert reuser["cache"]["built"] == []
    assert {"policy-fp32.tflite", "policy-dynamic.tflite"} <= set(reuser["cache"]["reused"])
    assert first["env"]["max_episode_steps"] == 30  # command-line env.* wins over the run's
    assert second["fidelity"]["agreement"] >= 0.9
    assert len(_csv(sweep / "1" / STEPS_FILE)) == 30


def test_probe_of_the_training_job_is_checked(trained_run, tmp_path) -> None:
    """probe.npz (logits saved at training time) must match the reloaded policy."""
    from rlperf.errors import CheckpointError
    from rlperf.layout import PROBE_ATOL
    from rlperf.models.policy_file import load_policy
    from rlperf.runs.probe import check_probe, read_probe
    from rlperf.tflite.export import torch_outputs

    net = load_policy(trained_run["policy"])
    obs = _frames(42, 8, seed=9)
    logits = torch_outputs(net, obs)[0]
    ckpt = tmp_path / CHECKPOINT_DIR
    ckpt.mkdir()
    policy = ckpt / POLICY_FILE
    policy.write_bytes(Path(trained_run["policy"]).read_bytes())

    def logits_of(o: np.ndarray) -> np.ndarray:
        return torch_outputs(load_policy(policy), o)[0]

    assert check_probe(read_probe(ckpt), logits_of) is None  # no probe: nothing to check
    np.savez(ckpt / PROBE_FILE, obs=obs, logits=logits, actions=logits.argmax(1))
    check = check_probe(read_probe(ckpt), logits_of)
    assert check["max_abs_logit_err"] <= check["tolerance"] == PROBE_ATOL["cpu"]
    assert check["greedy_agreement"] == 1.0 and check["observations"] == 8
    np.savez(ckpt / PROBE_FILE, obs=obs, logits=logits + 0.5, actions=logits.argmax(1))
    with pytest.raises(CheckpointError, match="does not reproduce the logits saved"):
        check_probe(read_probe(ckpt), logits_of)
