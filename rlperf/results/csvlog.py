"""Append-only CSV files whose every row reaches the disk before the next one starts."""

from __future__ import annotations

import contextlib
import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlperf.errors import ResultsWriteError


class CsvLog:
    """A CSV with a fixed header; ``write(row)`` appends one row and flushes it to disk.

    Columns missing from a row are written empty (read back as NaN), so every
    column is present from the first row; unknown keys are an error. A row the disk
    does not take (no space left) is a :class:`~rlperf.errors.ResultsWriteError` naming
    the file; the rows before it stay in the file, whole.
    """

    def __init__(self, path: Path, columns: Sequence[str], fsync: bool = False) -> None:
        self.path = Path(path)
        self.columns = list(columns)
        self._fsync = fsync
        self.rows = 0
        self._file = self.path.open("w", newline="")
        self._writer = csv.writer(self._file)
        self._put(self.columns, "its header")

    def write(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise KeyError(f"{self.path.name}: unknown columns {sorted(unknown)}")
        self._put([_cell(row.get(c)) for c in self.columns], f"row {self.rows + 1}")
        self.rows += 1

    def _put(self, cells: list[Any], what: str) -> None:
        try:
            self._writer.writerow(cells)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError as exc:
            self._discard()
            kept = "it is empty"
            if self.rows:
                kept = f"the {self.rows} row(s) before it are in the file"
            raise ResultsWriteError(
                f"cannot write {what} of {self.path}: {exc.strerror or exc}; {kept}"
            ) from exc

    def _discard(self) -> None:
        """Close the file without writing what its buffer still holds (a failed row)."""
        with contextlib.suppress(OSError):
            os.close(self._file.fileno())
        with contextlib.suppress(OSError):
            self._file.close()  # flushes into a closed descriptor: EBADF, the row is dropped

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> CsvLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV that :class:`CsvLog` wrote, as text (none when the file is absent)."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return repr(value)
    return value
