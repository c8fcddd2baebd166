"""Import a user's environment class from ``package.module:Class`` (``env.entry_point``).

The working-directory rule (docs/custom-env.md): a module next to where
``rlperf`` is run imports without installing anything, as with ``python -m``.

- The driver: the ``rlperf`` console script does not put the working directory
  on ``sys.path`` (``python -m`` does); :func:`load_entry_point` does, before it
  imports.
- Ray workers (env runners, learners, sweep trials): Ray 2.60 itself puts the
  directory ``ray.init`` was called from on every worker's ``sys.path`` for a
  driver script (``job_config._py_driver_sys_path`` in
  ``ray/_private/worker.py``), and rlperf calls ``ray.init`` from the working
  directory (Hydra does not change it; the sweep launcher starts Ray where it was
  started). Not covered: a Ray Client address (``ray://``) and a cluster whose
  nodes lack the folder — there the module must be installed on the cluster.
  ``tests/envs/test_custom_env.py`` trains a user env from a temporary working
  directory with a remote env runner.

Import is cheap: importlib only.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from rlperf.errors import EntryPointError


def parse_entry_point(spec: str) -> tuple[str, str]:
    """``"pkg.module:Class"`` -> (``"pkg.module"``, ``"Class"``)."""
    module, sep, attr = str(spec).partition(":")
    if not sep or not module or not attr or ":" in attr:
        raise EntryPointError(
            f"env.entry_point={spec!r} is not of the form package.module:Class "
            f"(e.g. my_envs.grid:GridWorld)"
        )
    return module, attr


def _ensure_cwd_on_path() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def load_entry_point(spec: str) -> Any:
    """The object ``spec`` names, its module imported with the working directory on sys.path.

    Raises:
        EntryPointError: a malformed spec, a module that is not found or raises on
            import, or a module without that attribute; the message names the spec,
            the folders searched and the underlying error.
    """
    module_name, attr = parse_entry_point(spec)
    _ensure_cwd_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise EntryPointError(
                f"env.entry_point={spec}: import {module_name} failed: no module named "
                f"{exc.name!r} in the working directory ({os.getcwd()}) or the installed "
                f"packages (run rlperf from the folder that holds {exc.name.split('.')[0]}/ or "
                f"{exc.name.split('.')[0]}.py)"
            ) from exc
        raise EntryPointError(
            f"env.entry_point={spec}: import {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:  # the user's module raised while it was imported
        raise EntryPointError(
            f"env.entry_point={spec}: import {module_name} raised {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise EntryPointError(
            f"env.entry_point={spec}: module {module_name} ({getattr(module, '__file__', '?')}) "
            f"has no attribute {attr!r}"
        ) from exc
