"""Which model kinds fit which environment spaces (torch-free, checked before Ray starts).

=================  =======================================  ==========================
model kind         observations                             actions
=================  =======================================  ==========================
``vision``         ``Box`` image ``(dim, dim, framestack)``  ``Discrete``
``mlp``            ``Box`` of numbers (flattened), or       ``Discrete`` (logits) or a
                   ``Discrete`` (one-hot inside the net)    1-D ``Box`` (Gaussian head)
=================  =======================================  ==========================
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from rlperf.errors import ModelSpaceError

#: Shipped options of each kind, named by errors that suggest a compatible model.
SUGGESTED_MODELS = {"vision": "model1 (or tiny, model2..model6)", "mlp": "mlp64 (or mlp256)"}


def is_image_space(space: Any) -> bool:
    """A ``Box`` of rank 3 (height, width, channels): what the vision models take."""
    return isinstance(space, spaces.Box) and len(space.shape) == 3


def describe_space(space: Any) -> str:
    """``Box(84x84x4, uint8)``, ``Box(4, float32)``, ``Discrete(16)``."""
    if isinstance(space, spaces.Box):
        return f"Box({'x'.join(str(d) for d in space.shape)}, {space.dtype})"
    return str(space)


def fitting_kind(obs_space: Any, action_space: Any) -> str | None:
    """The model kind that fits these spaces, or None when no shipped kind does."""
    if is_image_space(obs_space) and isinstance(action_space, spaces.Discrete):
        return "vision"
    obs_ok = isinstance(obs_space, spaces.Discrete) or (
        isinstance(obs_space, spaces.Box) and not is_image_space(obs_space)
    )
    act_ok = isinstance(action_space, spaces.Discrete) or (
        isinstance(action_space, spaces.Box) and len(action_space.shape) == 1
    )
    return "mlp" if obs_ok and act_ok else None


def check_model_spaces(model: Any, obs_space: Any, action_space: Any, env_name: str) -> None:
    """``model`` (the config subtree) fits ``env_name``'s spaces; else :class:`ModelSpaceError`.

    The message names the model, the env, both spaces and a model that fits.
    """
    kind = str(model.get("kind") or "vision")
    fit = fitting_kind(obs_space, action_space)
    if fit == kind:
        if kind == "vision":
            _check_frame(model, obs_space, env_name)
        return
    what = {
        "vision": "the study's conv network for square image frames with Discrete actions",
        "mlp": "an MLP for vector or Discrete observations",
    }[kind]
    suggestion = (
        f"use model={SUGGESTED_MODELS[fit]}"
        if fit is not None
        else "no shipped model kind takes these spaces (vision: image Box -> Discrete; mlp: "
        "vector Box or Discrete -> Discrete or 1-D Box)"
    )
    raise ModelSpaceError(
        f"model={model.get('name')} ({what}) cannot be used with {env_name}: observations "
        f"{describe_space(obs_space)}, actions {describe_space(action_space)}; {suggestion}"
    )


def _check_frame(model: Any, obs_space: Any, env_name: str) -> None:
    dim, stack = int(model.get("dim")), int(model.get("framestack"))
    if tuple(obs_space.shape) != (dim, dim, stack):
        raise ModelSpaceError(
            f"model={model.get('name')} takes {dim}x{dim}x{stack} frames but {env_name} gives "
            f"{describe_space(obs_space)}"
        )
