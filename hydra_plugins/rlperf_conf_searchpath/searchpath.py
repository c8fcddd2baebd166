"""Adds a user's ``./conf`` folder to rlperf's config search path (docs/configuration.md).

Hydra calls every SearchPathPlugin for every app; this one acts only when the
app's primary config comes from rlperf's shipped groups (``pkg://rlperf.conf``).
The user's folder goes right before them, so a user option of the same name
wins. Kept light: Hydra imports this module at plugin discovery.
"""

from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.plugins.search_path_plugin import SearchPathPlugin

from rlperf.config.search_path import SHIPPED_CONF, USER_CONF_PROVIDER, user_conf_dir


class RlperfUserConfSearchPath(SearchPathPlugin):
    """``<cwd>/conf`` before ``pkg://rlperf.conf`` when it exists and is not the shipped folder."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        paths = [element.path for element in search_path.get_path()]
        if SHIPPED_CONF not in paths:
            return
        folder = user_conf_dir()
        if folder is None or f"file://{folder}" in paths:
            return
        search_path.prepend(
            provider=USER_CONF_PROVIDER,
            path=f"file://{folder}",
            anchor=SearchPathQuery(provider=None, path=SHIPPED_CONF),
        )
