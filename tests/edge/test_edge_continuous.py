"""The edge stage on a continuous-action policy (a 2-D point-mass actor, SAC's tanh head):
the TFLite export of the reference actor, int8 with its output over the action range, the
action-error fidelity check that fails a planted error and calls a constant actor vacuous
(docs/edge.md#continuous-actions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlperf.layout import STEPS_FILE
from tests.edge.conftest import run_edge

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _env_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's own process imports the env's module (support.point_mass)."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))


@pytest.fixture(scope="module")
def box_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edge-box-cache")


def _overrides(run: Path, cache: Path, *extra: str) -> list[str]:
    return [
        f"run={run}", f"edge.cache_dir={cache}", "edge.episodes=6", "edge.warmup_steps=10",
        "edge.calibration_size=150", "edge.fidelity_observations=200", *extra,
    ]  # fmt: skip


def test_box_policy_through_rllib_fp32_and_int8(
    point_mass_run: dict[str, Any], box_cache: Path, compose_edge: Any, tmp_path: Path
) -> None:
    run = point_mass_run["path"]
    i8 = compose_edge(*_overrides(run, box_cache, "backend=tflite_int8"))
    s8 = run_edge(i8, tmp_path / "i8", job=True)
    assert s8["export"]["passed"] and s8["export"]["outputs"] == "actions"
    fid = s8["fidelity"]
    assert fid["action_dims"] == 2 and fid["action_range"] == [2.0, 1.0]
    assert "agreement" not in fid  # no argmax for a continuous action
    # int8 quantizes the output over the action range: errors of a few 1/255 steps.
    assert fid["action_err_p99"] <= 0.05 and not fid["flagged"]
    assert fid["verdict"] == "passed", fid["reference"]
    # The fitted actor beats random play on the same seeded episodes (what makes it evidence).
    assert fid["reference"]["vs_random_low"] > 0
    assert all(np.isfinite([fid["return_diff_low"], fid["return_diff_high"]]))
    assert s8["latency"]["action_ms"]["count"] == 6 * 30 - 10
    assert s8["delegate"]["status"] == "full"

    f32 = compose_edge(*_overrides(run, box_cache, "backend=tflite_fp32"))
    s32 = run_edge(f32, tmp_path / "f32", job=True)
    # rllib (torch) and tflite_fp32 act alike within 1e-4 of each dimension's range.
    assert s32["fidelity"]["action_err_max"] <= 1e-4
    assert s32["fidelity"]["return_tie"]
    rl = compose_edge(*_overrides(run, box_cache, "backend=rllib"))
    srl = run_edge(rl, tmp_path / "rl", job=True)
    assert srl["fidelity"] is None and srl["reference_returns"] == fid["reference_returns"]
    # The actions the env got are 2-D and inside the Box.
    import pandas as pd

    actions = pd.read_csv(tmp_path / "i8" / STEPS_FILE)["action"].str.split()
    values = np.array([[float(v) for v in a] for a in actions])
    assert values.shape[1] == 2
    assert (np.abs(values) <= [1.0 + 1e-6, 0.5 + 1e-6]).all()

    # The report: action-error columns for the variants, no agreement for a Box policy.
    from rlperf.report.build import build_report

    build_report([tmp_path], tmp_path / "report", figures=False)
    text = (tmp_path / "report" / "report.md").read_text()
    assert "action err p99 %" in text and "agreement %" not in text
    assert "the largest p99 action error is" in text


def test_planted_unscaled_mean_fails_the_fidelity_check(
    point_mass_run: dict[str, Any], box_cache: Path, compose_edge: Any, tmp_path: Path
) -> None:
    """An export that leaves out the map onto [low, high] (tanh(mean) itself) is flagged."""
    import keras

    from rlperf.tflite.convert import convert_keras
    from rlperf.tflite.export import build_keras_policy

    full = build_keras_policy(point_mass_run["net"])
    unscaled = keras.Model(full.input, full.get_layer("action_tanh").output)
    wrong = tmp_path / "unscaled-fp32.tflite"
    wrong.write_bytes(convert_keras(unscaled, "fp32"))
    cfg = compose_edge(
        *_overrides(point_mass_run["path"], box_cache, "backend=tflite_fp32"),
        f"model_path={wrong}",
    )
    fid = run_edge(cfg, tmp_path / "out")["fidelity"]
    assert fid["flagged"] and fid["verdict"] == "flagged"
    assert "above edge.action_tolerance=0.05" in fid["flag_reason"]
    assert fid["action_err_p99"] > 0.1


def test_constant_actor_makes_the_check_vacuous(
    compose_edge: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from support.point_mass import make_run_folder

    run = make_run_folder(tmp_path / "constant", fit_steps=0)
    import torch

    net = run["net"]
    with torch.no_grad():  # one action whatever the state
        net.pi_net[-1].weight.zero_()
    from rlperf.models.policy_file import save_policy
    from rlperf.runs.probe import write_probe

    save_policy(net, run["policy"])
    probe_obs = np.zeros((4, 2), np.float32)
    logits = net.logits(torch.from_numpy(probe_obs)).detach().numpy()
    write_probe(run["policy"].parent, probe_obs, logits, net.actions_of(logits), [2.0, 1.0])
    cfg = compose_edge(*_overrides(run["path"], tmp_path / "cache", "backend=tflite_int8"))
    fid = run_edge(cfg, tmp_path / "out")["fidelity"]
    assert fid["verdict"] == "vacuous"
    assert "barely vary" in fid["reference"]["vacuous_reason"]
    assert max(fid["reference"]["action_spread"]) < 0.05


def test_unbounded_box_and_heads_both_are_refused(point_mass_run, compose_edge) -> None:
    import gymnasium as gym

    from rlperf.edge.cell import EdgeCell, check_box_actions
    from rlperf.errors import TfliteInputError

    cfg = compose_edge("edge.heads=both")
    cell = EdgeCell(cfg, Path("."), "tflite_fp32", Path("."), env={"id": "Free-v0"})
    free = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    with pytest.raises(TfliteInputError, match="unbounded"):
        check_box_actions(cell, free)
    cell.net = point_mass_run["net"]  # SAC's actor: no value network
    with pytest.raises(TfliteInputError, match="edge.heads=both"):
        check_box_actions(cell, gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
