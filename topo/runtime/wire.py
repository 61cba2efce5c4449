"""topo's wire format and (de)serialization.

Transport: pyzmq. A node server is a ROUTER socket; each client thread (and
the per-process futures engine) talks to it through its own DEALER socket.
Every message is one zmq multipart message:

    request : [header, method (utf-8), pickle payload, *out-of-band buffers]
    reply   : [header, pickle payload, *out-of-band buffers]
    header  : struct "<2sBxQd" = magic b"TP", kind, pad, call id, timeout (s)

Payloads are pickle protocol 5; numpy buffers (JAX arrays are converted to
numpy first) travel out of band as their own frames, sent with copy=False (no
extra copy on send) and unpickled straight from the received zmq frames.
A reply of kind ``K_FAULT`` carries a utf-8 text, never a pickle.

Authentication happens in the zmq handshake through ZAP (see ``auth.py``),
before any message reaches Python, so nothing from an unauthenticated peer
is ever unpickled. Measured side by side (``bench/rpc_bench.py``): PLAIN with
the program secret costs nothing per message, CURVE adds encryption cost on
every byte (large arrays pay the most), so local backends use PLAIN on
loopback and cross-host programs use CURVE (encrypted, mutually
authenticated).
"""

from __future__ import annotations

import pickle
import struct
import sys
from collections.abc import Sequence
from typing import Any

MAGIC = b"TP"
HEADER = struct.Struct("<2sBxQd")
HEADER_SIZE = HEADER.size

K_CALL = 1  # request
K_OK = 2  # reply: pickled result
K_ERROR = 3  # reply: pickled exception description (errors.encode_exception)
K_FAULT = 4  # reply: utf-8 text, the request itself was rejected

Frames = list[Any]


def pack_header(kind: int, call_id: int, timeout: float = 0.0) -> bytes:
    """Build the fixed-size header frame."""
    return HEADER.pack(MAGIC, kind, call_id, timeout)


def unpack_header(data: bytes) -> tuple[int, int, float] | None:
    """Parse a header frame; None when it is not a topo header."""
    if len(data) != HEADER_SIZE:
        return None
    magic, kind, call_id, timeout = HEADER.unpack(data)
    if magic != MAGIC:
        return None
    return kind, call_id, timeout


class _JaxPickler(pickle.Pickler):
    """Pickler that turns JAX arrays into numpy arrays on the host."""

    def reducer_override(self, obj: Any) -> Any:
        jax = sys.modules.get("jax")
        if jax is not None and isinstance(obj, jax.Array):
            import numpy as np

            return np.asarray(obj).__reduce_ex__(5)
        return NotImplemented


def dumps(obj: Any) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """Pickle ``obj`` with protocol 5; return the payload and out-of-band buffers."""
    buffers: list[pickle.PickleBuffer] = []
    if "jax" in sys.modules:
        import io

        out = io.BytesIO()
        _JaxPickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
        return out.getvalue(), buffers
    return pickle.dumps(obj, protocol=5, buffer_callback=buffers.append), buffers


def loads(payload: Any, buffers: Sequence[Any]) -> Any:
    """Unpickle a payload whose out-of-band buffers are ``buffers`` (zmq frames ok)."""
    views = [b.buffer if hasattr(b, "buffer") else b for b in buffers]
    data = payload.buffer if hasattr(payload, "buffer") else payload
    return pickle.loads(data, buffers=views)


def request_frames(call_id: int, method: str, timeout: float, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Frames:
    """Frames of one call request."""
    payload, bufs = dumps((args, kwargs))
    return [pack_header(K_CALL, call_id, timeout), method.encode(), payload, *bufs]


def reply_frames(kind: int, call_id: int, value: Any) -> Frames:
    """Frames of one reply (``value`` is pickled, or utf-8 text for K_FAULT)."""
    if kind == K_FAULT:
        return [pack_header(kind, call_id), str(value).encode()]
    payload, bufs = dumps(value)
    return [pack_header(kind, call_id), payload, *bufs]


def frames_nbytes(frames: Sequence[Any]) -> int:
    """Total size of a list of zmq frames / bytes."""
    return sum(len(f) if not isinstance(f, pickle.PickleBuffer) else f.raw().nbytes
               for f in frames)
