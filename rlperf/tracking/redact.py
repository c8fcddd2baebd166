"""Secrets kept out of results: parameters, tags, ``summary.json``, ``fingerprint.json``,
Hydra's snapshot of the config (docs/tracking.md#secrets).

A secret is the password of a URI (``http://user:pass@host``), the value of a config key
named like one (``password``, ``token``, ``api_key``, ``secret``), and the value of an
environment variable named like one (``WANDB_API_KEY``, ``MLFLOW_TRACKING_PASSWORD``, ...).
Each is replaced by ``***`` wherever its text appears.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rlperf.layout import CONFIG_FILE

MASK = "***"
#: A key (config or environment) holds a secret when a word of it is one of these.
SECRET_WORDS = ("password", "passwd", "secret", "token", "api_key", "apikey", "credential")
#: The password part of a URI's user info.
URI_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<pw>[^@/\s]+)@")
#: Shorter values are never searched for (an env var set to "1" is no secret to mask).
MIN_SECRET_LEN = 6


def secret_key(key: str) -> bool:
    low = str(key).lower()
    return any(word in low for word in SECRET_WORDS)


class Redactor:
    """Masks known secret values and URI passwords in text and in nested trees."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        found = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}
        self.secrets = sorted(found, key=len, reverse=True)  # the longest first

    @classmethod
    def of(cls, *trees: Any, environ: Mapping[str, str] | None = None) -> Redactor:
        """The secrets of ``trees`` (config values under secret keys, URI passwords) and of
        the environment (variables named like a secret)."""
        env = os.environ if environ is None else environ
        secrets = [v for k, v in env.items() if secret_key(k)]
        for tree in trees:
            secrets.extend(_tree_secrets(tree))
        return cls(secrets)

    def text(self, value: str) -> str:
        out = URI_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", value)
        for secret in self.secrets:
            out = out.replace(secret, MASK)
        return out

    def tree(self, value: Any, key: str = "") -> Any:
        """A copy of ``value`` with every secret masked (mappings, lists, strings)."""
        if isinstance(value, Mapping):
            return {k: self.tree(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.tree(v) for v in value]
        if isinstance(value, str):
            return MASK if secret_key(key) and value else self.text(value)
        if secret_key(key) and value is not None:
            return MASK
        return value

    def scrub_file(self, path: Path) -> bool:
        """Rewrite a text file with its secrets masked; whether anything changed."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        masked = self.text(text)
        if masked == text:
            return False
        path.write_text(masked, encoding="utf-8")
        return True


def scrub_hydra_files(out_dir: Path, redactor: Redactor) -> None:
    """Mask secrets in Hydra's snapshot of the job (``.hydra/``: the config and the command
    line), written before rlperf's code runs."""
    if not redactor.secrets:
        return
    for path in (out_dir / CONFIG_FILE).parent.glob("*.yaml"):
        redactor.scrub_file(path)


def _tree_secrets(value: Any, key: str = "") -> list[str]:
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in _tree_secrets(v, str(k))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _tree_secrets(v)]
    if isinstance(value, str):
        found = [m["pw"] for m in URI_PASSWORD.finditer(value)]
        return [*found, value] if secret_key(key) else found
    return []
