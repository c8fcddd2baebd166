"""Reads what W&B stored for an offline run: its transaction log, ``run-<id>.wandb``.

wandb 0.31 (its Go core) keeps an offline run's config, history and summary only in that
log until ``wandb sync`` uploads it: no ``files/config.yaml`` or ``wandb-summary.json`` is
written. The log is LevelDB's log format (32 KiB blocks of chunks: CRC-32, length, type)
after a 7-byte W&B header, each record a ``wandb.proto.wandb_internal_pb2.Record``; this
reader decodes it with W&B's own protobuf definitions.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = b":W&B"
BLOCK = 32 * 1024
CHUNK_HEADER = 7  # crc32 (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _chunks(data: bytes) -> Iterator[bytes]:
    if data[:4] != HEADER:
        raise ValueError("not a W&B transaction log")
    pos, pending = CHUNK_HEADER, b""
    while pos + CHUNK_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # a block's tail too short for a header: padding
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        body = data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        if kind == 0 and length == 0:
            continue
        if zlib.crc32(bytes([kind]) + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"bad checksum at byte {pos}")
        if kind == FULL:
            yield body
        elif kind == FIRST:
            pending = body
        elif kind == MIDDLE:
            pending += body
        elif kind == LAST:
            yield pending + body


@dataclass
class OfflineRun:
    name: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # W&B's own "_wandb" included
    history: list[dict[str, Any]] = field(default_factory=list)  # each with "_step"
    summary: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    exit_code: int | None = None


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_offline_run(run_dir: Path) -> OfflineRun:
    """Config, history rows, summary, saved files and exit code of an offline run folder."""
    from wandb.proto import wandb_internal_pb2 as pb

    (log,) = run_dir.glob("run-*.wandb")
    run = OfflineRun()
    for chunk in _chunks(log.read_bytes()):
        record = pb.Record()
        record.ParseFromString(chunk)
        kind = record.WhichOneof("record_type")
        if kind == "run":  # the run as wandb.init made it, its config with it
            run.name, run.group = record.run.display_name, record.run.run_group
            run.tags = list(record.run.tags)
            for item in record.run.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":  # later updates
            for item in record.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            row = {_key(i): json.loads(i.value_json) for i in record.history.item}
            run.history.append(row)
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = json.loads(item.value_json)
        elif kind == "files":
            run.files.extend(f.path for f in record.files.files)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run
