"""A sweep's storage: where its cells' files go when the nodes share no filesystem.

``hydra.launcher.storage`` (docs/sweeps.md#storage) is null (the sweep folder itself,
which every node must then see) or a URI ``pyarrow.fs.FileSystem.from_uri`` resolves:
``s3://bucket/prefix`` (``?endpoint_override=host:port&scheme=http`` for an
S3-compatible server such as MinIO or Ceph), ``gs://bucket/prefix``, or an absolute
path on a filesystem every node mounts (NFS). It is kept as the plain string the user
gave: Ray Tune resolves it again on every node, with that node's credentials, and
pickles only the string into its experiment state.

Inside the storage a sweep's cell lives at ``<experiment>/<cell folder>/`` (one Tune
experiment per group of cells; :func:`trial_folder`), and the launcher copies its
``sweep.json`` and ``multirun.yaml`` to the top. :func:`mirror` rebuilds a local sweep
folder from that (``rlperf-report s3://...``).

Credentials never travel in the URI: a query parameter that carries a key is refused
(:func:`parse_storage`), and the variables of :data:`CREDENTIAL_ENV` reach the worker
nodes through the Ray job's environment, never through a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from rlperf.errors import ConfigError
from rlperf.layout import CELL_FILE, INDEX_FILE, MULTIRUN_FILE, SEARCH_FILE

#: What the launcher's option is called (messages name it).
STORAGE_KEY = "hydra.launcher.storage"

#: URI query parameters pyarrow takes credentials from: refused (they would be written into
#: sweep.json, cell.json and Tune's pickled experiment state).
SECRET_PARAMS = ("access_key", "secret_key", "session_token")

#: The environment variables that give the storage's credentials and endpoint: passed on
#: to the Ray job (and so to the worker nodes, where the uploads run) when the launcher
#: joins a cluster; never written anywhere.
CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "GOOGLE_APPLICATION_CREDENTIALS",
)

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def is_uri(value: str) -> bool:
    """Whether ``value`` names storage by URI (``s3://...``), not by a local path."""
    return bool(_SCHEME.match(value))


@dataclass(frozen=True)
class Storage:
    """A sweep's storage (``uri``: the string the user gave) and what is under it."""

    uri: str

    @cached_property
    def _resolved(self) -> tuple[Any, str]:
        from pyarrow import fs as pafs

        if not is_uri(self.uri):
            return pafs.LocalFileSystem(), str(Path(self.uri).resolve())
        return pafs.FileSystem.from_uri(self.uri)  # type: ignore[no-any-return]

    def filesystem(self) -> tuple[Any, str]:
        """``(pyarrow filesystem, root path on it)``, resolved once; the credentials come from
        the environment."""
        return self._resolved

    def tune_path(self) -> str:
        """What Tune's ``RunConfig(storage_path=...)`` gets: the URI, or the absolute path."""
        return self.uri if is_uri(self.uri) else str(Path(self.uri).resolve())

    def uri_of(self, rel: str) -> str:
        """The URI of ``rel`` under the storage, its query kept (what Tune restores from)."""
        if not is_uri(self.uri):
            return str(PurePosixPath(self.tune_path(), rel))
        base, sep, query = self.uri.partition("?")
        return f"{base.rstrip('/')}/{rel}{sep}{query}"

    def describe(self, rel: str = "") -> str:
        """``rel`` under the storage, for people (the URI's query left out)."""
        base = self.uri.split("?", 1)[0].rstrip("/")
        return f"{base}/{rel}" if rel else base

    def fetch(self, rel: str, dest: Path) -> int:
        """Copy the folder ``rel`` (under the storage) into ``dest``; the number of files
        copied (0 when the storage holds nothing there)."""
        from pyarrow import fs as pafs

        fs, root = self.filesystem()
        src = _join(root, rel)
        info = fs.get_file_info(pafs.FileSelector(src, recursive=True, allow_not_found=True))
        files = [i for i in info if i.type == pafs.FileType.File]
        local = pafs.LocalFileSystem()
        for f in files:
            target = dest / PurePosixPath(f.path).relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            pafs.copy_files(f.path, str(target), source_filesystem=fs, destination_filesystem=local)
        return len(files)

    def put(self, local: Path, rel: str) -> None:
        """Copy the local file ``local`` to ``rel`` under the storage."""
        fs, root = self.filesystem()
        target = _join(root, rel)
        fs.create_dir(str(PurePosixPath(target).parent), recursive=True)
        with fs.open_output_stream(target) as out:
            out.write(local.read_bytes())

    def read_text(self, rel: str) -> str | None:
        """The text of the file ``rel`` under the storage; None when there is none."""
        from pyarrow import fs as pafs

        fs, root = self.filesystem()
        path = _join(root, rel)
        if fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with fs.open_input_stream(path) as f:
            return bytes(f.read()).decode()

    def check_writable(self) -> None:
        """Write, read back and delete a marker file: the storage is reachable with this
        process's credentials. Raises :class:`ConfigError` in one line otherwise."""
        rel = f".rlperf-storage-check-{os.getpid()}"
        try:
            fs, root = self.filesystem()
            path = _join(root, rel)
            fs.create_dir(root, recursive=True)
            with fs.open_output_stream(path) as out:
                out.write(b"rlperf")
            with fs.open_input_stream(path) as f:
                ok = bytes(f.read()) == b"rlperf"
            fs.delete_file(path)
        except Exception as exc:  # pyarrow's OSError, or an endpoint that does not answer
            raise ConfigError(
                f"{STORAGE_KEY}={self.describe()} cannot be written from here: "
                f"{_first_line(exc)} (credentials come from the environment: "
                f"AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for s3://)"
            ) from None
        if not ok:
            raise ConfigError(f"{STORAGE_KEY}={self.describe()} did not return what was written")


def parse_storage(value: Any) -> Storage | None:
    """``hydra.launcher.storage``'s value as a :class:`Storage` (None: the sweep folder).

    Refused in one line: a URI pyarrow cannot resolve, a relative path, a URI whose query
    carries a credential.
    """
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    if not is_uri(text):
        if not Path(text).is_absolute():
            raise ConfigError(
                f"{STORAGE_KEY}={text} must be a URI (s3://bucket/prefix, gs://bucket/prefix) "
                f"or an absolute path on a filesystem every node mounts"
            )
        return Storage(text)
    query = dict(parse_qsl(urlsplit(text).query))
    secret = [k for k in query if k.lower() in SECRET_PARAMS]
    if secret:
        raise ConfigError(
            f"{STORAGE_KEY} carries a credential in its URI ({', '.join(secret)}=...), which "
            f"would be written into sweep.json and Tune's experiment state: give it through "
            f"the environment instead (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
        )
    storage = Storage(text)
    try:
        storage.filesystem()
    except Exception as exc:
        raise ConfigError(
            f"{STORAGE_KEY}={storage.describe()} is not a storage pyarrow can open: "
            f"{_first_line(exc)} (valid: s3://bucket/prefix[?endpoint_override=host:port"
            f"&scheme=http], gs://bucket/prefix, or an absolute path)"
        ) from None
    return storage


def credential_env() -> dict[str, str]:
    """The :data:`CREDENTIAL_ENV` variables this process has (for the Ray job's
    environment)."""
    return {k: os.environ[k] for k in CREDENTIAL_ENV if os.environ.get(k)}


def trial_folder(subdir: str) -> str:
    """The name of a cell's trial folder in the storage: its folder in the sweep
    (``3``, ``3-r1``), with any ``/`` made ``_``."""
    return subdir.replace("/", "_").replace("\\", "_") or "cell"


def mirror(uri: str, cache: Path | None = None) -> Path:
    """A local sweep folder rebuilt from the storage ``uri``: its ``sweep.json`` and every
    cell that has a copy there (under its own folder name), in a folder named as the sweep
    folder was; returns that folder.

    ``cache``: where mirrors are kept (default ``$XDG_CACHE_HOME/rlperf/storage``). A
    storage with no ``sweep.json`` is refused in one line.
    """
    storage = parse_storage(uri)
    assert storage is not None
    text = storage.read_text(INDEX_FILE)
    if text is None:
        raise ConfigError(
            f"{storage.describe()} holds no {INDEX_FILE}: not the storage of an rlperf sweep "
            f"(the launcher writes it there when a sweep with {STORAGE_KEY} ends)"
        )
    index = json.loads(text)
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(uri.encode()).hexdigest()[:12]
    # Named as the sweep folder was: the report labels configurations by folder names.
    name = re.sub(r"[^\w.-]+", "_", str(index.get("folder") or "sweep"))
    dest = (cache or home / "rlperf" / "storage") / digest / name
    shutil.rmtree(dest, ignore_errors=True)  # an earlier copy: rebuilt, never mixed
    dest.mkdir(parents=True)
    (dest / INDEX_FILE).write_text(text)
    for name in (MULTIRUN_FILE, SEARCH_FILE):
        other = storage.read_text(name)
        if other is not None:
            (dest / name).write_text(other)
    for rec in index.get("cells", {}).values():
        if rec.get("storage"):
            storage.fetch(str(rec["storage"]), dest / str(rec["subdir"]))
    return dest


def stored_copy(run_dir: Path) -> tuple[str, str] | None:
    """Where a sweep cell's folder ``run_dir`` has its copy: ``(storage URI, folder under
    it)`` from its ``cell.json`` and its sweep's ``sweep.json``; None when it has none (a
    sweep without a storage, a single run)."""
    try:
        cell = json.loads((run_dir / CELL_FILE).read_text())
        index = json.loads((run_dir.parent / INDEX_FILE).read_text())
    except (OSError, ValueError):
        return None
    uri = (index.get("options") or {}).get("storage")
    rel = cell.get("storage")
    return (str(uri), str(rel)) if uri and rel else None


def _join(root: str, rel: str) -> str:
    return str(PurePosixPath(root, rel)) if rel else root


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
