"""Import a user's environment class from ``package.module:Class`` (``env.entry_point``).

The working-directory rule (docs/custom-env.md): a module next to where
``rlperf`` is run imports without installing anything, as with ``python -m``.
The driver finds it because :func:`load_entry_point` puts the working
directory on ``sys.path``; every Ray worker (env runners, learners, sweep
trials) finds it because the Ray rlperf starts gets the working directory on
its workers' ``PYTHONPATH`` (:func:`worker_pythonpath`, used by
:func:`rlperf.resources.ray_session.ray_init_kwargs`). Ray workers do not inherit
the driver's ``sys.path`` and do not start in its working directory, so neither
would find the module otherwise.

Import is cheap: importlib only.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

#: The environment variable rlperf sets to the working directory of the command that
#: started Ray; workers put it on sys.path (through PYTHONPATH) and
#: :func:`import_roots` reads it, so a sweep trial imports from the same folder.
WORKDIR_ENV = "RLPERF_WORKDIR"


class EntryPointError(ImportError):
    """``env.entry_point`` does not name an importable class; the message says why."""


def parse_entry_point(spec: str) -> tuple[str, str]:
    """``"pkg.module:Class"`` -> (``"pkg.module"``, ``"Class"``)."""
    module, sep, attr = str(spec).partition(":")
    if not sep or not module or not attr or ":" in attr:
        raise EntryPointError(
            f"env.entry_point={spec!r} is not of the form package.module:Class "
            f"(e.g. my_envs.grid:GridWorld)"
        )
    return module, attr


def import_roots() -> list[str]:
    """Folders a user's module is imported from besides installed packages: the working
    directory of the command that started Ray (:data:`WORKDIR_ENV`), and this one's."""
    roots = [os.environ.get(WORKDIR_ENV, ""), os.getcwd()]
    return [r for i, r in enumerate(roots) if r and r not in roots[:i]]


def _ensure_on_path() -> None:
    for root in reversed(import_roots()):
        if root not in sys.path:
            sys.path.insert(0, root)


def load_entry_point(spec: str) -> Any:
    """The object ``spec`` names, its module imported with :func:`import_roots` on sys.path.

    Raises:
        EntryPointError: a malformed spec, a module that is not found or raises on
            import, or a module without that attribute; the message names the spec,
            the folders searched and the underlying error.
    """
    module_name, attr = parse_entry_point(spec)
    _ensure_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise EntryPointError(
                f"env.entry_point={spec}: import {module_name} failed: no module named "
                f"{exc.name!r} in the working directory {import_roots()} or the installed "
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


def worker_pythonpath(cwd: str | None = None) -> dict[str, str]:
    """Environment variables that make Ray workers import from the working directory.

    ``PYTHONPATH`` = the working directory, then the driver's own ``PYTHONPATH``;
    :data:`WORKDIR_ENV` = the working directory.
    """
    cwd = cwd or os.getcwd()
    parts = [cwd, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    unique = [p for i, p in enumerate(parts) if p not in parts[:i]]
    return {"PYTHONPATH": os.pathsep.join(unique), WORKDIR_ENV: cwd}
