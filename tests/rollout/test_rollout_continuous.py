"""The rollout of continuous-action (SAC) policies, shapes (1,) and (2,): timed per step as
discrete ones, acting with the reference actor (docs/rollout.md#continuous-actions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlperf.layout import CHECKPOINT_DIR, STEPS_FILE, SUMMARY_FILE
from rlperf.models.policy_file import load_policy
from tests.conftest import run_rlperf

pytestmark = pytest.mark.slow


def test_sac_policy_rolls_out_with_the_reference_actor(sac_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "rollout"
    proc = run_rlperf(
        [
            "stage=rollout",
            f"run={sac_run}",
            "rollout.steps=120",
            "rollout.warmup_steps=20",
            "workers=0",
            f"hydra.run.dir={out}",
        ],  # fmt: skip
        cwd=tmp_path,
        env={"PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    s = json.loads((out / SUMMARY_FILE).read_text())
    assert s["status"] == "completed" and s["steps"] == 120
    # Its loop's energy per 1 000 actions: the CPU's where RAPL was read (not on machines
    # without powercap, which the job's cpu_energy record then names).
    assert s["energy"]["actions"] == 120
    measured = (s.get("cpu_energy") or {}).get("measured", False)  # none: telemetry off
    assert ("cpu_energy_per_1k_actions_j" in s["energy"]) == measured
    # Per-step latency exactly as for a Discrete policy.
    assert set(s["latency"]) == {"forward_ms", "action_ms", "env_step_ms"}
    assert s["latency"]["action_ms"]["count"] == 100
    # RLlib's greedy path (connectors, module-to-env) gave the saved reference actor's
    # actions on the probe's observations, within 1e-5 of each dimension's range.
    probe = s["probe"]
    assert probe["max_action_err_of_range"] <= 1e-5 and "greedy_agreement" not in probe
    # Every action the env got lies in the Box, one value per dimension.
    net = load_policy(sac_run / CHECKPOINT_DIR)
    dims = len(net.action_spec["low"])
    actions = pd.read_csv(out / STEPS_FILE)["action"].astype(str).str.split()
    values = np.array([[float(v) for v in a] for a in actions])
    assert values.shape == (120, dims)
    low, high = np.array(net.action_spec["low"]), np.array(net.action_spec["high"])
    assert ((values >= low) & (values <= high)).all()
    assert len(np.unique(values.round(6), axis=0)) > 1  # the actor responds to the state
    # The point mass gives float64 observations: cast once to float32, and both the
    # training and the rollout say so in their protocol (the workload is the same).
    trained = json.loads((sac_run / SUMMARY_FILE).read_text())["env_protocol"]
    cast = "float64 -> float32" if "point_mass" in str(trained["env_id"]) else None
    assert trained.get("observation_cast") == s["env_protocol"].get("observation_cast") == cast
