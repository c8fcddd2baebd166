"""The wire format of a request: one observation as a ``.npy`` array (binary, self-describing).

A request body is the bytes :func:`numpy.save` writes for one observation: a
short header (magic, dtype, shape) and the raw array. No pickle is ever
accepted. :func:`decode_observation` checks the header against the policy's
input before reading the data; a body that is not ``.npy``, or holds another
shape or dtype, raises :class:`PayloadError`, whose message names the expected
shape and dtype (the HTTP deployment answers it with status 400).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlperf.errors import PayloadError

#: Content type of a request body.
CONTENT_TYPE = "application/x-npy"

_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def encode_observation(obs: np.ndarray) -> bytes:
    """``obs`` as ``.npy`` bytes (what a client sends)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(obs), allow_pickle=False)
    return buf.getvalue()


def expectation(shape: Sequence[int], dtype: str) -> str:
    """How the expected input is named in every error message."""
    return f"one .npy array of shape {tuple(int(s) for s in shape)} and dtype {dtype}"


def decode_observation(body: bytes, shape: Sequence[int], dtype: str) -> np.ndarray:
    """The observation in ``body``, checked to have ``shape`` and ``dtype``.

    Raises:
        PayloadError: not ``.npy``, a pickled object, another shape or dtype,
            or a truncated array; the message names what was expected and what came.
    """
    want = expectation(shape, dtype)
    buf = io.BytesIO(body)
    try:
        version = np.lib.format.read_magic(buf)
        read_header = _HEADER_READERS.get(version)
        if read_header is None:
            raise ValueError(f".npy format version {version} is not supported")
        header = read_header(buf)  # (shape, fortran_order, dtype)
    except Exception as exc:
        raise PayloadError(f"the body is not a .npy array ({exc}); expected {want}") from exc
    got_shape, fortran, got_dtype = header
    if got_dtype.hasobject:
        raise PayloadError(f"object arrays are not accepted; expected {want}")
    if tuple(got_shape) != tuple(int(s) for s in shape) or got_dtype != np.dtype(dtype):
        raise PayloadError(
            f"got an array of shape {tuple(got_shape)} and dtype {got_dtype}; expected {want}"
        )
    data = body[buf.tell() :]
    expected_bytes = int(np.prod(got_shape)) * got_dtype.itemsize
    if len(data) != expected_bytes:
        raise PayloadError(
            f"the array data has {len(data)} bytes, its header announces {expected_bytes}; "
            f"expected {want}"
        )
    flat = np.frombuffer(data, dtype=got_dtype)
    return flat.reshape(tuple(got_shape), order="F" if fortran else "C")


def action_json(action: np.ndarray) -> int | list[float]:
    """One action as a response's ``action``: an int (Discrete), or a Box policy's vector
    as a list of floats (JSON numbers round-trip float32 exactly)."""
    a = np.asarray(action)
    return int(a) if a.ndim == 0 else [float(v) for v in a.ravel()]


def action_from_json(value: Any) -> int | list[float]:
    """A response's ``action`` back: an int, or a list of floats."""
    if isinstance(value, list):
        return [float(v) for v in value]
    return int(value)
