"""A training job folder as the training job leaves it, without training (a test kit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlperf.layout import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    ENV_TO_MODULE_DIR,
    MODULE_TO_ENV_DIR,
    POLICY_FILE,
    RL_MODULE_DIR,
    RLLIB_METADATA,
)
from rlperf.models.policy_file import save_policy
from rlperf.models.vision_net import VisionNet

#: A conv stack that reaches 1x1 from 42x42 (the tiny model's input).
TINY_FILTERS = [[4, [8, 8], 4], [8, [4, 4], 2], [16, [6, 6], 1]]
#: The RLlib checkpoint's parts the run checks look for (here empty folders).
RLLIB_PARTS = (RL_MODULE_DIR, ENV_TO_MODULE_DIR, MODULE_TO_ENV_DIR)


def make_run(root: Path, filters: list[Any] = TINY_FILTERS, dim: int = 42, **cfg: Any) -> Path:
    """A training job folder as the training job leaves it (RLlib parts as empty folders)."""
    run = root / "run"
    (run / CONFIG_FILE.parent).mkdir(parents=True)
    config = {
        "stage": "train",
        "seed": 0,
        "model": {"name": "tiny", "dim": dim, "framestack": 4, "conv_filters": filters},
        "env": {
            "id": "ALE/Pong-v5",
            "dim": "${model.dim}",
            "framestack": "${model.framestack}",
            "max_episode_steps": None,
            "noop_max": 30,
        },
        "algo": {"name": "ppo", "train_batch_size": 256},
        **cfg,
    }
    OmegaConf.save(OmegaConf.create(config), run / CONFIG_FILE)
    ckpt = run / CHECKPOINT_DIR
    for part in RLLIB_PARTS:
        (ckpt / part).mkdir(parents=True)
    (ckpt / RLLIB_METADATA).write_text(
        json.dumps({"ray_version": "2.60.0", "checkpoint_version": "2.1"})
    )
    save_policy(VisionNet((dim, dim, 4), 6, filters), ckpt / POLICY_FILE, extra={"iteration": 2})
    return run
