"""The committed continuous-action policy (benchmarks/policies/pendulum_sac): SAC's actor on
Pendulum, trained and checked by ``benchmarks/bench_pendulum_policy.py`` with rlperf's own
commands (docs/compression.md#the-pendulum-policy-continuous-actions).

These tests hold the copy to its provenance (the files are the checked ones, the recorded
greedy return meets issue 27's criterion) and run the edge stage on the folder as a user
would: ``rllib`` and ``tflite_fp32`` act alike within 1e-4 of the range (a reference that is
not the one actor fails this); QAT and magnitude pruning build at the smallest fit budget
on a policy whose actions matter, QAT's input covering the observation space and
pruning's action error judged against the tolerance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.committed import checked_provenance

from tests.conftest import REPO
from tests.edge.conftest import run_edge

POLICY = REPO / "benchmarks" / "policies" / "pendulum_sac"
#: Issue 27's criterion: a greedy return of at least -250 over 20 seeded episodes.
MIN_RETURN = -250.0


@pytest.fixture(scope="module")
def provenance() -> dict:
    return checked_provenance(POLICY)


def test_committed_files_are_the_checked_ones(provenance) -> None:
    # (the fixture checked every file against its SHA-256)
    assert provenance["train_command"].startswith("rlperf experiment=algo_targets algo=sac")


def test_recorded_checks_meet_the_criterion(provenance) -> None:
    checks = provenance["checks"]
    assert checks["criteria_met"] and not checks["vacuous"]
    assert checks["episodes"] == len(checks["returns"]) == 20
    assert checks["return_mean"] >= MIN_RETURN
    assert checks["above_random_interval"][0] > 0
    assert checks["fp32_action_err_max_of_range"] <= 1e-4
    # RLlib 2.60's own greedy action (clip of the unsquashed mean) on the same episodes.
    rllib = checks["rllib_greedy"]
    assert rllib["reference_return_mean"] == pytest.approx(checks["return_mean"], abs=1e-3)


def _edge(compose_edge: Any, tmp_path: Path, backend: str, *extra: str) -> dict[str, Any]:
    cfg = compose_edge(
        f"run={POLICY}", f"backend={backend}", f"edge.cache_dir={tmp_path / 'c'}",
        "edge.episodes=4", "edge.warmup_steps=20", "edge.calibration_size=200",
        "edge.fidelity_observations=200", *extra,
    )  # fmt: skip
    return run_edge(cfg, tmp_path / backend)


@pytest.mark.slow
def test_rllib_and_fp32_act_alike_and_compressed_variants_are_judged(
    compose_edge: Any, tmp_path: Path
) -> None:
    fp32 = _edge(compose_edge, tmp_path, "tflite_fp32")["fidelity"]
    assert fp32["action_err_max"] <= 1e-4 and fp32["action_dims"] == 1
    assert fp32["verdict"] == "passed", fp32.get("flag_reason")
    # The actor's actions span the torque range (not a near-constant actor).
    assert fp32["reference"]["action_spread"][0] > 0.5
    budget = ("edge.finetune_steps=40", "edge.finetune_lr=[1e-3]")
    # Magnitude pruning at the smallest budget: half the weights zero, its action error
    # measured and judged against the tolerance (600 steps: docs/compression.md).
    pruned = _edge(compose_edge, tmp_path, "tflite_prune50", *budget)
    assert pruned["weights"]["sparsity"] == pytest.approx(0.5, abs=0.02)
    fid = pruned["fidelity"]
    assert fid["verdict"] != "vacuous" and 0 < fid["action_err_p99"] <= fid["action_err_max"]
    assert fid["flagged"] == (fid["action_err_p99"] > 0.05 or fid["flag_reason"] is not None)
    # QAT's int8 input covers the observation space (the angular velocity's +-8), not
    # only the calibration set's range: beyond it a swing's actions were 46 % off.
    # (Without: up to 0.46 of the range on the fidelity set's fastest swings.) One
    # quantization scale for cos, sin (+-1) and the velocity (+-8) still costs int8 its
    # precision on this policy: p99 errors of 5-9 % of the range (docs/compression.md).
    qat = _edge(compose_edge, tmp_path, "tflite_qat", *budget)["fidelity"]
    assert qat["action_err_max"] <= 0.12 and qat["verdict"] != "vacuous"


@pytest.mark.slow
def test_per_feature_input_scaling_brings_int8_within_the_tolerance(
    compose_edge: Any, tmp_path: Path
) -> None:
    """Full int8 with one input scale for cos, sin (±1) and the angular velocity (±8) costs
    this policy 6-8 % of the torque range at p99; each feature normalized to its own range
    (the default) brings it under the 5 % tolerance. The normalization is in the file."""
    one = _edge(compose_edge, tmp_path, "tflite_int8", "edge.input_scaling=per_tensor")
    own = _edge(compose_edge, tmp_path, "tflite_int8")
    tensor, feature = one["fidelity"], own["fidelity"]
    assert tensor["action_err_p99"] > 0.05 and tensor["verdict"] == "flagged"
    assert feature["action_err_p99"] <= 0.05 and feature["verdict"] == "passed"
    assert feature["action_err_p99"] < 0.8 * tensor["action_err_p99"]
    norm = own["model_info"]["input_normalization"]  # read back from the file
    assert norm["shape"] == [3] and norm["half_width"][2] == pytest.approx(8.0)  # ±8 rad/s
    assert norm["half_width"][:2] == pytest.approx([1.0, 1.0], abs=1e-3)  # cos, sin
    assert one["model_info"]["input_normalization"] is None
