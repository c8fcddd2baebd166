"""Edge-stage test kit: trained policies, the study's reference files, a stub Edge TPU
runtime and a fake ``edgetpu_compiler``. Lives with the tests (``tests/support``), not in
the package.

Policies with trained (not freshly initialised) weights, for tests and benchmarks.

A freshly initialised VisionNet has zero biases and near-equal logits: almost
any perturbation flips its greedy action, so it says little about how
quantization treats a real policy (the study's exported files look like
that). :func:`make_run_folder` instead trains the network for a few hundred
supervised steps on real Pong frames to imitate a simple rule (see
:func:`motion_band_labels`), which gives non-zero biases, spread weights,
several actions in use and clear margins between actions, in seconds. The
network needs some capacity for that: :data:`SMALL_MODEL` (42x42 input, 173k
parameters) learns it; the 4-8-16-channel ``model=tiny`` collapses to one
action. It writes what a training job leaves behind:
``checkpoint/rlperf_policy.pt`` and ``.hydra/config.yaml`` with the ``model``
and ``env`` subtrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

#: A small model for tests: 42x42x4 input, conv stack reaching 1x1.
SMALL_MODEL: dict[str, Any] = {
    "name": "small42",
    "dim": 42,
    "framestack": 4,
    "conv_filters": [[16, [8, 8], 4], [32, [4, 4], 2], [64, [6, 6], 1]],
}


def motion_band_labels(observations: np.ndarray, num_actions: int) -> np.ndarray:
    """The teacher: of ``num_actions`` horizontal bands of the screen, the one whose pixels
    changed most between the oldest and the newest frame of the stack (standardised per band
    over the frames, so that every band wins some frames)."""
    obs = observations.astype(np.float32)
    diff = np.abs(obs[..., -1] - obs[..., 0])  # (N, H, W)
    bands = np.array_split(diff, num_actions, axis=1)
    energy = np.stack([b.mean(axis=(1, 2)) for b in bands], axis=1)
    z = (energy - energy.mean(axis=0)) / (energy.std(axis=0) + 1e-6)
    return z.argmax(axis=1)


def train_supervised(
    net: Any, observations: np.ndarray, labels: np.ndarray, steps: int = 300, seed: int = 0
) -> float:
    """Adam on cross-entropy of the logits (plus a value regression); returns the accuracy."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    x_all = torch.from_numpy(observations)
    y_all = torch.from_numpy(labels.astype(np.int64))
    target_v = torch.from_numpy(labels.astype(np.float32) / max(1, int(labels.max(initial=1))))
    net.train()
    for _ in range(steps):
        idx = torch.from_numpy(rng.integers(0, len(observations), 64))
        x, y = x_all[idx], y_all[idx]
        loss = torch.nn.functional.cross_entropy(net.logits(x), y)
        loss = loss + torch.nn.functional.mse_loss(net.value(x), target_v[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        pred = torch.cat(
            [net.logits(x_all[i : i + 256]).argmax(1) for i in range(0, len(x_all), 256)]
        )
    return float((pred == y_all).float().mean())


def make_run_folder(
    path: Path,
    model: Mapping[str, Any],
    env: Mapping[str, Any] | None = None,
    train_steps: int = 300,
    frames: int = 600,
    seed: int = 0,
) -> dict[str, Any]:
    """Write a training-run-like folder with a supervised-trained policy.

    Args:
        path: the folder to create.
        model: the ``model`` subtree (``name``, ``dim``, ``framestack``, ``conv_filters``).
        env: ``env`` keys overriding the Pong defaults (``dim``/``framestack`` follow ``model``).
        train_steps: Adam steps (0 = keep the initial weights).
        frames: real frames to train on (random play, every 2nd frame).

    Returns:
        ``{"path", "policy", "accuracy", "label_histogram"}``.
    """
    import torch
    from omegaconf import OmegaConf

    from rlperf.envs.atari import DEFAULT_ENV_CONFIG, env_spaces
    from rlperf.layout import CHECKPOINT_DIR, CONFIG_FILE, POLICY_FILE
    from rlperf.models.policy_file import save_policy
    from rlperf.models.vision_net import VisionNet
    from rlperf.tflite.calibration import collect_observations

    env_cfg = {k: v for k, v in DEFAULT_ENV_CONFIG.items() if k != "seed"}
    env_cfg.update(dict(env or {}))
    env_cfg["dim"], env_cfg["framestack"] = int(model["dim"]), int(model.get("framestack", 4))
    n_actions = int(env_spaces(env_cfg)[1].n)
    torch.manual_seed(seed)
    net = VisionNet(
        (env_cfg["dim"], env_cfg["dim"], env_cfg["framestack"]),
        n_actions,
        [list(f) for f in model["conv_filters"]],
    )
    accuracy = float("nan")
    labels = np.zeros(0, dtype=np.int64)
    if train_steps > 0:
        obs, _ = collect_observations(env_cfg, frames, seed=seed + 1000, stride=2)
        labels = motion_band_labels(obs, n_actions)
        accuracy = train_supervised(net, obs, labels, train_steps, seed)
    path = Path(path)
    policy = save_policy(net, path / CHECKPOINT_DIR / POLICY_FILE, extra={"trained": "supervised"})
    (path / CONFIG_FILE).parent.mkdir(parents=True, exist_ok=True)
    model_cfg = {
        "name": model.get("name", "custom"),
        "dim": env_cfg["dim"],
        "framestack": env_cfg["framestack"],
        "conv_filters": [list(f) for f in model["conv_filters"]],
    }
    OmegaConf.save(
        OmegaConf.create({"stage": "train", "seed": seed, "model": model_cfg, "env": env_cfg}),
        path / CONFIG_FILE,
    )
    return {
        "path": path,
        "policy": policy,
        "accuracy": accuracy,
        "label_histogram": np.bincount(labels, minlength=n_actions).tolist(),
    }


#: The 2021 study's reference files kept with the tests (a partial copy; MIT, see its README).
STUDY_DATA = Path(__file__).resolve().parents[1] / "data" / "thesis"


def study_reference_file(relative: str) -> Path | None:
    """A file of the 2021 study's reference data, e.g. ``exported_models/model1_quant.tflite``.

    Looked up in ``tests/data/thesis`` only (the copies the tests ship, listed in
    its README); ``None`` where that copy lacks the file, so a test can skip. The
    files are MIT licensed (J. Guzmán Muñoz, 2021); keep their README's
    attribution with any copy.
    """
    path = STUDY_DATA / relative
    return path if path.is_file() else None


def build_stub_runtime(source: Path, out_dir: Path) -> Path | None:
    """Compile ``tests/data/edgetpu_stub.c`` into a shared library; None without a C compiler.

    The stub exports ``tflite_plugin_create_delegate`` / ``_destroy_delegate``;
    ``EDGETPU_STUB_MODE=fail`` (default) makes creation fail like a runtime with
    no device, ``noop`` returns a delegate that takes no op.
    """
    import shutil
    import subprocess

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "libedgetpu_stub.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(source)], check=True)
    return out


_FAKE_COMPILER = """#!{python}
import shutil, sys
from pathlib import Path
args = sys.argv[1:]
out = Path(args[args.index("-o") + 1])
model = Path(args[-1])
shutil.copy(model, out / (model.stem + "_edgetpu.tflite"))
(out / (model.stem + "_edgetpu.log")).write_text("Operator  Count  Status\\n")
print({log!r})
"""


def install_fake_compiler(bin_dir: Path, log: str) -> Path:
    """An ``edgetpu_compiler`` stand-in that copies the model unchanged and prints ``log``."""
    import sys

    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "edgetpu_compiler"
    path.write_text(_FAKE_COMPILER.format(python=sys.executable, log=log))
    path.chmod(0o755)
    return path


def load_study_dataset(path: Path) -> np.ndarray:
    """The 2021 study's ``dataset_modelN.npy`` (one ``np.save`` per frame on one file)."""
    frames = []
    with Path(path).open("rb") as f:
        while True:
            try:
                frames.append(np.load(f, allow_pickle=False))
            except (EOFError, ValueError):
                break
    if not frames:
        raise ValueError(f"{path}: no frames found")
    return np.stack(frames)


#: The ``model`` subtree of ``model=mlp64`` (conf/model/mlp64.yaml).
MLP64: dict[str, Any] = {"name": "mlp64", "kind": "mlp", "hiddens": [64, 64], "activation": "tanh"}
#: The ``env`` subtree of ``env=cartpole`` (conf/env/cartpole.yaml).
CARTPOLE_ENV: dict[str, Any] = {
    "kind": "gym", "id": "CartPole-v1", "config": None, "max_episode_steps": None
}  # fmt: skip


def cartpole_teacher(observations: np.ndarray) -> np.ndarray:
    """A PD controller that keeps CartPole up for its 500 steps from every start: push
    towards the side the pole falls to, with the cart's drift as a weak correction."""
    x, x_dot, theta, theta_dot = np.asarray(observations, dtype=np.float64).T
    return (theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0).astype(np.int64)


def make_cartpole_run(
    path: Path, seed: int = 0, steps: int = 600, constant_action: int | None = None
) -> dict[str, Any]:
    """A training-run-like folder with an ``mlp64`` CartPole policy that plays to the cap.

    Trained in seconds by imitation (behaviour cloning of :func:`cartpole_teacher` on the
    states the teacher visits, each perturbed by a random push so that recoveries are in
    the data) rather than by PPO, which takes minutes on a loaded 2-core machine
    (``rlperf experiment=cartpole_target``, docs/results.md#time-to-target). Its logits
    have clear margins away from the decision boundary, as a trained policy's do.

    ``constant_action``: instead, a policy whose logits favour that action by 50 on every
    state (a near-constant reference, like the Pong policy of the quickstart).

    Returns:
        ``{"path", "policy", "accuracy"}``.
    """
    import gymnasium as gym
    import torch
    from omegaconf import OmegaConf

    from rlperf.layout import CHECKPOINT_DIR, CONFIG_FILE, POLICY_FILE
    from rlperf.models.mlp_net import MlpNet
    from rlperf.models.policy_file import save_policy

    rng = np.random.default_rng(seed)
    env = gym.make("CartPole-v1")
    states = []
    for episode in range(30):
        obs, _ = env.reset(seed=seed + 10_000 + episode)
        for _ in range(200):
            states.append(obs)
            action = int(cartpole_teacher(obs[None])[0])
            if rng.random() < 0.2:
                action = int(rng.integers(2))  # explore off the teacher's path
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    env.close()
    obs_all = np.asarray(states, dtype=np.float32)
    labels = cartpole_teacher(obs_all)
    torch.manual_seed(seed)
    net = MlpNet.for_spaces(env.observation_space, env.action_space, MLP64["hiddens"], "tanh")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 64-unit MLP: more threads only wait for each other under load
    try:
        accuracy = train_supervised(net, obs_all, labels, steps, seed)
    finally:
        torch.set_num_threads(threads)
    if constant_action is not None:
        with torch.no_grad():
            net.pi_net[-1].bias[constant_action] += 50.0
    path = Path(path)
    policy = save_policy(net, path / CHECKPOINT_DIR / POLICY_FILE, extra={"trained": "imitation"})
    (path / CONFIG_FILE).parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(
        OmegaConf.create({"stage": "train", "seed": seed, "model": MLP64, "env": CARTPOLE_ENV}),
        path / CONFIG_FILE,
    )
    return {"path": path, "policy": policy, "accuracy": accuracy}
