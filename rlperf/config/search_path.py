"""Where rlperf's config groups come from: the shipped ``conf/`` and a user's own ``conf/``.

The shipped groups live in the repository's top-level ``conf/`` and install as
the package ``rlperf.conf`` (``pyproject.toml``), so Hydra finds them as
``pkg://rlperf.conf`` in a checkout and in an installed wheel alike.

A ``conf/`` folder in the directory ``rlperf`` is run from is a *user* config
folder: its options (``conf/experiment/my_sweep.yaml``, ``conf/model/big.yaml``,
...) join the shipped groups without any flag, and where both have an option of
the same name, the user's wins (it comes first in Hydra's search path). Inside
a checkout the working directory's ``conf/`` *is* the shipped one and is not
added twice. The search path in force is recorded in ``fingerprint.json``.

Import is cheap (pathlib and importlib.resources only): the search-path plugin
(``hydra_plugins/rlperf_conf_searchpath``) imports this module at discovery.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: Hydra's search-path entry of the shipped config groups.
SHIPPED_CONF = "pkg://rlperf.conf"
#: The primary config's name (``conf/config.yaml``).
PRIMARY_CONFIG = "config"
#: Provider name of the user's folder in Hydra's search path (``--info searchpath``).
USER_CONF_PROVIDER = "rlperf-user-conf"
#: The user config folder, relative to the working directory.
USER_CONF_DIR = "conf"


def shipped_conf_dir() -> Path:
    """The folder holding the shipped config groups (``conf/`` of a checkout, or the wheel's)."""
    return Path(str(resources.files("rlperf.conf")))


def user_conf_dir(cwd: Path | None = None) -> Path | None:
    """``<cwd>/conf`` when it exists and is not the shipped folder itself, else ``None``."""
    candidate = (cwd if cwd is not None else Path.cwd()) / USER_CONF_DIR
    if not candidate.is_dir():
        return None
    try:
        if candidate.resolve() == shipped_conf_dir().resolve():
            return None
    except OSError:
        return None
    return candidate.resolve()


def user_primary_config_clash(cwd: Path | None = None) -> Path | None:
    """A ``conf/config.yaml`` in the user folder, which would replace rlperf's primary config."""
    folder = user_conf_dir(cwd)
    if folder is None:
        return None
    path = folder / f"{PRIMARY_CONFIG}.yaml"
    return path if path.is_file() else None


def preset_file_overrides(args: list[str]) -> list[str]:
    """``experiment=<path>.yaml`` -> ``experiment=<name>`` and the path's folder in Hydra's
    search path (``hydra.searchpath``), so a preset file anywhere runs as a preset.

    The file must lie in a folder named ``experiment/`` (a config group is a folder):
    a search writes its best trial as ``<search folder>/experiment/search_best.yaml``
    (docs/search.md). Raises ValueError with the reason for a file that cannot be one.
    """
    out: list[str] = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if key != "experiment" or not sep or not value.endswith((".yaml", ".yml")):
            out.append(arg)
            continue
        path = Path(value).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"{arg}: no such preset file")
        if path.parent.name != "experiment":
            raise ValueError(
                f"{arg}: a preset file must lie in a folder named experiment/ "
                f"(it is in {path.parent.name}/)"
            )
        # Next to it: Hydra's argument parser wants the overrides together.
        out += [f"experiment={path.stem}", f"hydra.searchpath=[file://{path.parent.parent}]"]
    return out
