"""``hydra.launcher.storage``'s value, and a sweep rebuilt from a storage (rlperf-report's
input), on a storage given as a path; the object-store path is
tests/sweep/test_storage_cluster.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlperf.errors import ConfigError
from rlperf.layout import CELL_FILE, INDEX_FILE, MULTIRUN_FILE, SUMMARY_FILE
from rlperf.results.storage import (
    Storage,
    credential_env,
    mirror,
    parse_storage,
    stored_copy,
    trial_folder,
)
from tests.conftest import run_rlperf
from tests.support.cluster import FAKE_KEY_ID


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (f"s3://b/p?access_key={FAKE_KEY_ID}&secret_key=x",
         r"carries a credential in its URI \(access_key, secret_key=\.\.\.\).*AWS_ACCESS_KEY_ID"),
        ("runs/here", "must be a URI .* or an absolute path"),
        ("foo://x/y", r"foo://x/y is not a storage pyarrow can open: .*valid: s3://bucket"),
    ],
)  # fmt: skip
def test_a_storage_that_cannot_work_is_refused_in_one_line(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        parse_storage(value)
    assert "\n" not in str(err.value) and FAKE_KEY_ID not in str(err.value)


def test_null_is_the_sweep_folder_and_uris_keep_their_string() -> None:
    assert parse_storage(None) is None and parse_storage("") is None
    uri = "s3://bucket/sweeps/a?endpoint_override=127.0.0.1:9000&scheme=http"
    storage = parse_storage(uri)
    assert storage == Storage(uri) and storage.tune_path() == uri
    assert storage.describe("group0-x/3") == "s3://bucket/sweeps/a/group0-x/3"
    assert trial_folder("3-r1") == "3-r1" and trial_folder("a/b") == "a_b"


def test_only_the_credential_variables_present_are_passed_on(monkeypatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("HOME_GROWN_SECRET", "no")
    env = credential_env()
    assert env["AWS_ACCESS_KEY_ID"] == FAKE_KEY_ID and "HOME_GROWN_SECRET" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env


def test_a_sweep_is_rebuilt_from_its_storage_under_its_own_name(tmp_path: Path) -> None:
    """A storage given as a path, laid out as the launcher leaves it: ``sweep.json`` at the
    top, each cell under ``<experiment>/<folder>``; the copy is named as the sweep folder was,
    holds the cells, and an earlier copy's leftovers are gone."""
    store = tmp_path / "store"
    cell = store / "group0-20261205-100000" / "3"
    (cell / "checkpoint").mkdir(parents=True)
    (cell / SUMMARY_FILE).write_text('{"status": "completed"}')
    (cell / "checkpoint" / "w.pt").write_bytes(b"\0\1")
    index = {"folder": "10-00-00", "options": {"storage": str(store)},
             "cells": {"h": {"subdir": "3", "storage": "group0-20261205-100000/3"},
                       "g": {"subdir": "4", "storage": None}}}  # fmt: skip
    (store / INDEX_FILE).write_text(json.dumps(index))
    (store / MULTIRUN_FILE).write_text("hydra: {}\n")
    cache = tmp_path / "cache"
    first = mirror(str(store), cache)
    (first / "stale.txt").write_text("left from before")
    copy = mirror(str(store), cache)
    assert copy == first and copy.name == "10-00-00"
    assert (copy / "3" / "checkpoint" / "w.pt").read_bytes() == b"\0\1"
    assert json.loads((copy / INDEX_FILE).read_text()) == index
    assert (copy / MULTIRUN_FILE).is_file() and not (copy / "4").exists()
    assert not (copy / "stale.txt").exists()
    # The copy's cell knows where it came from (what a downstream trial fetches).
    (copy / "3" / CELL_FILE).write_text(json.dumps(index["cells"]["h"]))
    assert stored_copy(copy / "3") == (str(store), "group0-20261205-100000/3")
    assert stored_copy(copy / "4") is None
    with pytest.raises(ConfigError, match="holds no sweep.json: not the storage of an rlperf"):
        mirror(str(tmp_path / "empty"), cache)


def test_a_credential_in_the_uri_stops_the_sweep_before_anything_is_written(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    uri = f"s3://b/p?secret_key={FAKE_KEY_ID}"
    proc = run_rlperf(["-m", "model=mlp64", "env=cartpole", f"hydra.sweep.dir={sweep}",
                       f"hydra.launcher.storage='{uri}'"], cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("rlperf: hydra.launcher.storage carries a credential in its URI")
    assert FAKE_KEY_ID not in proc.stderr and not sweep.exists()
