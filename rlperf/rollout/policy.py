"""The trained policy acting in this process the way RLlib's new API stack computes actions.

RLlib 2.x has no ``Algorithm.compute_single_action`` on the new API stack; its
documented inference path (``examples/inference/policy_inference_after_training
_w_connector.py``, and what ``SingleAgentEnvRunner._sample`` does per step) is:

1. put the observation into a ``SingleAgentEpisode``,
2. the env-to-module connector pipeline turns the episode into a batch
   (last observation, time/state handling, batching, numpy → torch on the device),
3. ``RLModule.forward_inference`` (greedy) or ``forward_exploration`` (sampling),
4. the module-to-env pipeline turns logits into an env action (``GetActions``:
   the argmax through ``to_deterministic()`` when greedy, a sample of the
   Categorical otherwise; then tensor → numpy, unbatching, clipping).

:class:`DriverPolicy` runs exactly that for one observation and times step 3
on its own. Its connector pipelines are restored from the checkpoint
(``env_runner/env_to_module_connector`` and ``module_to_env_connector``); the
RLModule either from the checkpoint (``RLModule.from_checkpoint``) or from a
started, restored ``Algorithm`` (``Algorithm.get_module()``, the driver's copy).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlperf.errors import CheckpointError
from rlperf.layout import ENV_TO_MODULE_DIR, MODULE_TO_ENV_DIR, RL_MODULE_DIR

ACTION_SELECTION = {
    False: "greedy: argmax of the logits, or a Box policy's reference actor "
    "(forward_inference, GetActions.to_deterministic())",
    True: "sampled from the action distribution (forward_exploration, torch seeded with `seed`)",
}


def resolve_device(requested: str, gpus_visible: bool) -> torch.device:
    """``rollout.device``: ``auto`` is CUDA when the GPU layout makes a GPU visible.

    That is what the study's RLlib 1.1 driver did (its torch policy moved to the
    GPU whenever one was visible), so its GPU rows measure GPU inference.
    """
    if requested == "auto":
        requested = "cuda" if gpus_visible else "cpu"
    return torch.device("cuda:0" if requested == "cuda" else requested)


class DriverPolicy:
    """One RLModule plus its connector pipelines, acting on single observations.

    Args:
        module: the (single-agent) torch RLModule.
        env_to_module: RLlib env-to-module connector pipeline.
        module_to_env: RLlib module-to-env connector pipeline.
        observation_space, action_space: the env's (single) spaces.
        device: where the module and its input tensors live.
        explore: ``rollout.explore`` — sample instead of greedy actions.
        source: how the module was obtained (recorded in ``summary.json``).
    """

    def __init__(
        self,
        module: Any,
        env_to_module: Any,
        module_to_env: Any,
        observation_space: Any,
        action_space: Any,
        device: torch.device,
        explore: bool = False,
        source: str = "",
    ) -> None:
        # RLlib: deferred, the rollout job reads resolve_device and ACTION_SELECTION before Ray.
        from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor
        from ray.rllib.core.columns import Columns
        from ray.rllib.env.single_agent_episode import SingleAgentEpisode

        # Looked up once, not inside the timed act().
        self._episode_cls = SingleAgentEpisode
        self._actions_key = Columns.ACTIONS
        self._actions_for_env_key = Columns.ACTIONS_FOR_ENV
        self.module = module
        self.env_to_module = env_to_module
        self.module_to_env = module_to_env
        self.observation_space = observation_space
        self.action_space = action_space
        self.device = device
        self.explore = bool(explore)
        self.source = source
        module.to(device)
        module.eval()
        # Restored pipelines keep the device they were saved with (the CPU of the
        # local env runner); RLlib builds GPU env runners' pipelines with `device=`.
        for piece in env_to_module.connectors:
            if isinstance(piece, NumpyToTensor):
                piece._device = None if device.type == "cpu" else device
        self._cuda = device.type == "cuda"
        self._episode: Any = None
        self._last_action: Any = None
        self._last_extra: dict[str, Any] = {}
        #: Nanoseconds of the module forward in the last :meth:`act` call.
        self.last_forward_ns = 0

    # ------------------------------------------------------------------ builders

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_dir: Path,
        device: torch.device,
        explore: bool = False,
        module: Any | None = None,
        source: str | None = None,
    ) -> DriverPolicy:
        """Restore the connector pipelines (and the module, unless given) from a checkpoint.

        Raises:
            rlperf.errors.CheckpointError: a part does not load (truncated
                pickle, another class), naming it.
        """
        # RLlib: deferred, as in __init__.
        from ray.rllib.connectors.env_to_module import EnvToModulePipeline
        from ray.rllib.connectors.module_to_env import ModuleToEnvPipeline
        from ray.rllib.core.rl_module.rl_module import RLModule

        def restore(kind: Any, rel: Path, what: str) -> Any:
            path = checkpoint_dir / rel
            try:
                return kind.from_checkpoint(str(path))
            except Exception as exc:
                raise CheckpointError(
                    f"{path} does not load ({type(exc).__name__}: {exc}); expected RLlib's "
                    f"{what} saved by the training job (is the checkpoint truncated?)"
                ) from exc

        if module is None:
            module = restore(RLModule, RL_MODULE_DIR, "RLModule")
            source = source or "RLModule.from_checkpoint"
        e2m = restore(EnvToModulePipeline, ENV_TO_MODULE_DIR, "env-to-module connector pipeline")
        m2e = restore(ModuleToEnvPipeline, MODULE_TO_ENV_DIR, "module-to-env connector pipeline")
        return cls(
            module,
            e2m,
            m2e,
            module.observation_space,
            module.action_space,
            device,
            explore,
            source or "given module",
        )

    @classmethod
    def from_config(
        cls, algo_config: Any, observation_space: Any, action_space: Any, device: torch.device
    ) -> DriverPolicy:
        """A freshly initialised module and default pipelines of an ``AlgorithmConfig``.

        For benchmarks (random weights): the same pieces a training job builds.
        """
        # RLlib: deferred, as in __init__.
        from ray.rllib.core import DEFAULT_MODULE_ID
        from ray.rllib.env import INPUT_ENV_SINGLE_SPACES

        spaces = {
            INPUT_ENV_SINGLE_SPACES: (observation_space, action_space),
            DEFAULT_MODULE_ID: (observation_space, action_space),
        }
        spec = algo_config.get_rl_module_spec(spaces=spaces, inference_only=True)
        module = spec.build()
        e2m = algo_config.build_env_to_module_connector(spaces=spaces, device=None)
        m2e = algo_config.build_module_to_env_connector(env=None, spaces=spaces)
        return cls(
            module, e2m, m2e, observation_space, action_space, device, False, "RLModuleSpec.build"
        )

    # ------------------------------------------------------------------ acting

    def reset(self) -> None:
        """Start a new episode (call before the first :meth:`act` after ``env.reset()``)."""
        self._episode = None

    def act(
        self,
        obs: Any,
        reward: float = 0.0,
        terminated: bool = False,
        truncated: bool = False,
    ) -> Any:
        """Observation in, action out (the previous step's reward etc. go into the episode).

        The action is an int for a Discrete action space, else the array the env gets.

        The module forward alone takes :attr:`last_forward_ns` of it (on CUDA
        including a ``synchronize`` so that the kernel time is inside it).
        """
        if self._episode is None:
            self._episode = self._episode_cls(
                observations=[obs],
                observation_space=self.observation_space,
                action_space=self.action_space,
            )
        else:
            self._episode.add_env_step(
                obs,
                self._last_action,
                reward,
                terminated=terminated,
                truncated=truncated,
                extra_model_outputs=self._last_extra,
            )
        episodes = [self._episode]
        shared: dict[str, Any] = {}
        module = self.module
        batch = self.env_to_module(
            episodes=episodes, rl_module=module, explore=self.explore, shared_data=shared
        )
        forward = module.forward_exploration if self.explore else module.forward_inference
        t0 = time.perf_counter_ns()
        out = forward(batch)
        if self._cuda:
            torch.cuda.synchronize()
        self.last_forward_ns = time.perf_counter_ns() - t0
        to_env = self.module_to_env(
            batch=out, episodes=episodes, rl_module=module, explore=self.explore, shared_data=shared
        )
        actions = to_env.pop(self._actions_key)
        for_env = to_env.pop(self._actions_for_env_key, actions)
        self._last_action = actions[0]
        self._last_extra = {k: v[0] for k, v in to_env.items()}
        action = for_env[0]
        return int(action) if np.ndim(action) == 0 else action

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """Logits (action-distribution inputs) of a batch of observations, on the policy's
        device."""
        # RLlib: deferred, as in __init__.
        from ray.rllib.core.columns import Columns

        x = torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)
        with torch.inference_mode():
            out = self.module.forward_inference({Columns.OBS: x})
        return out[Columns.ACTION_DIST_INPUTS].float().cpu().numpy()

    def greedy_actions(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions of a batch of observations through the same connector pipelines
        as :meth:`act` (each as an episode's first step), e.g. to check a Box policy
        against the reference actor (:func:`rlperf.runs.probe.check_probe`)."""
        explore, self.explore = self.explore, False
        try:
            out = []
            for o in obs:
                self.reset()
                out.append(np.asarray(self.act(o), dtype=np.float64))
        finally:
            self.explore = explore
            self.reset()
        return np.stack(out)

    def describe(self) -> dict[str, Any]:
        """What executes the policy: process, device, threads, pipelines."""
        info: dict[str, Any] = {
            "process": "driver",
            "pid": os.getpid(),
            "device": str(self.device),
            "torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "cpu_affinity": sorted(os.sched_getaffinity(0)),
            "policy_source": self.source,
            "module_class": type(self.module).__name__,
            "env_to_module": [type(c).__name__ for c in self.env_to_module.connectors],
            "module_to_env": [type(c).__name__ for c in self.module_to_env.connectors],
            "action_selection": ACTION_SELECTION[self.explore],
        }
        if self._cuda:
            info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
            info["gpu_name"] = torch.cuda.get_device_name(self.device)
        return info
