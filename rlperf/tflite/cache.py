"""Edge artifacts cached by the content hash of the policy they came from.

Layout: ``<edge.cache_dir>/<sha256 of rlperf_policy.pt, first 16 hex>/``, one
folder per trained policy, shared by every cell of a sweep (and by later
sweeps). Names (documented in ``docs/edge.md``) encode every input that
changes the bytes: heads, variant, and for data-dependent files a short hash
of their settings. A cell builds what is missing while holding the folder's
lock (``fcntl.flock``), so cells running in parallel build each artifact once
and the others wait and reuse it. Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: Default ``edge.cache_dir`` (null in the config).
DEFAULT_CACHE_DIR = Path("~/.cache/rlperf/edge")


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def settings_hash(settings: Mapping[str, Any], length: int = 10) -> str:
    """Short stable hash of a settings dict (sorted JSON)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def resolve_cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    """``edge.cache_dir`` as an absolute path (null = ``~/.cache/rlperf/edge``)."""
    return Path(cache_dir if cache_dir else DEFAULT_CACHE_DIR).expanduser().resolve()


class ArtifactCache:
    """The cache folder of one policy (``root/<key>``)."""

    def __init__(self, root: Path, key: str) -> None:
        self.root = Path(root)
        self.key = key
        self.dir = self.root / key
        self.dir.mkdir(parents=True, exist_ok=True)

    @classmethod
    def for_policy(cls, root: Path, policy_file: Path) -> ArtifactCache:
        """The cache of the policy whose file is ``policy_file`` (keyed by its content hash)."""
        digest = file_sha256(policy_file)
        cache = cls(root, digest[:16])
        cache.update_manifest({"policy_sha256": digest, "policy_source": str(policy_file)})
        return cache

    def path(self, name: str) -> Path:
        """Where the artifact ``name`` lives (whether or not it exists yet)."""
        return self.dir / name

    def has(self, name: str) -> bool:
        return self.path(name).is_file()

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock on this policy's folder (blocks while another cell builds)."""
        with (self.dir / ".lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Atomically write an artifact."""
        target = self.path(name)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
        return target

    def write_json(self, name: str, payload: Mapping[str, Any]) -> Path:
        return self.write_bytes(name, (json.dumps(payload, indent=2, default=str) + "\n").encode())

    def read_json(self, name: str) -> dict[str, Any]:
        return dict(json.loads(self.path(name).read_text()))

    def update_manifest(self, fields: Mapping[str, Any]) -> None:
        """Merge ``fields`` into ``manifest.json`` (what this folder is and holds)."""
        with self.lock():
            manifest = self.read_json("manifest.json") if self.has("manifest.json") else {}
            manifest.setdefault("created", datetime.now(UTC).isoformat(timespec="seconds"))
            manifest.update(fields)
            self.write_json("manifest.json", manifest)

    def record_artifact(self, name: str, description: Mapping[str, Any]) -> None:
        """Describe an artifact in the manifest (caller holds the lock or does not need it)."""
        manifest = self.read_json("manifest.json") if self.has("manifest.json") else {}
        manifest.setdefault("artifacts", {})[name] = dict(description)
        self.write_json("manifest.json", manifest)
