"""topo's wire format and (de)serialization.

Transport: pyzmq. A node server is a ROUTER socket; each client thread (and
the per-process futures engine) talks to it through its own DEALER socket.
Every message is one zmq multipart message whose first frame carries
everything small, so a typical call is a single frame each way:

    request : [header + method (utf-8) + pickle payload, *out-of-band buffers]
    reply   : [header + pickle payload, *out-of-band buffers]
    header  : struct "<2sBBQdH" = magic b"TP", kind, flags, call id,
              timeout (s), length of the method name

When many calls are in flight, one-frame requests and replies are coalesced:
a ``K_BATCH`` frame is a header (its call id field holds the count) followed
by each message as a little-endian u32 length and its bytes. That makes one
zmq message, one send and one receive, of up to ``BATCH_MAX`` calls.

A payload of 64 KiB or more travels in a frame of its own (flag ``F_SPLIT``)
instead of being copied into the first frame. Payloads are pickle protocol 5;
numpy buffers (JAX arrays are converted to numpy first) travel out of band as
their own frames, sent with copy=False (no extra copy on send) and unpickled
straight from the received zmq frames. A reply of kind ``K_FAULT`` carries a
utf-8 text, never a pickle. Measured here: a 3-frame send costs ~19 µs in
pyzmq, a 1-frame send ~2.5 µs, which is why small calls are one frame.

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
from typing import Any, NamedTuple

import zmq

MAGIC = b"TP"
HEADER = struct.Struct("<2sBBQdH")
HEADER_SIZE = HEADER.size

K_CALL = 1  # request
K_OK = 2  # reply: pickled result
K_ERROR = 3  # reply: pickled exception description (errors.encode_exception)
K_FAULT = 4  # reply: utf-8 text, the request itself was rejected
K_BATCH = 5  # several one-frame messages (requests or replies) in one frame

F_SPLIT = 1  # the payload is the second frame, not the tail of the first
SPLIT_AT = 64 * 1024
BATCH_MAX = 32  # messages coalesced into one K_BATCH frame at most
BATCH_BYTES = 64 * 1024  # ...and their bytes, about
MIN_FRAME_LIMIT = 1 << 20  # servers accept frames this large at least (a batch fits)
_LEN = struct.Struct("<I")

Frames = list[Any]
SNDMORE = int(zmq.SNDMORE)  # plain ints: pyzmq's enum flags cost microseconds per use
NOBLOCK = int(zmq.NOBLOCK)


class Message(NamedTuple):
    """A parsed message: header fields, the method (requests), payload and buffers."""

    kind: int
    call_id: int
    timeout: float
    method: str
    payload: Any
    buffers: Sequence[Any]


def _view(frame: Any) -> memoryview:
    try:
        return frame.buffer  # a zmq Frame
    except AttributeError:
        return memoryview(frame)


def parse(frames: Sequence[Any], start: int = 0) -> Message | None:
    """Parse received frames (zmq Frames or bytes) from ``frames[start]`` on; None when
    they are not a topo message. A ``K_BATCH`` frame parses too (see ``split_batch``)."""
    if len(frames) <= start:
        return None
    first = _view(frames[start])
    if len(first) < HEADER_SIZE:
        return None
    magic, kind, flags, call_id, timeout, mlen = HEADER.unpack_from(first)
    if magic != MAGIC or HEADER_SIZE + mlen > len(first):
        return None
    method = ""
    if mlen:
        try:
            method = str(first[HEADER_SIZE : HEADER_SIZE + mlen], "utf-8")
        except UnicodeDecodeError:
            return None
    if flags & F_SPLIT:
        if len(frames) < start + 2 or len(first) != HEADER_SIZE + mlen:
            return None
        payload = _view(frames[start + 1])
        return Message(kind, call_id, timeout, method, payload, frames[start + 2 :])
    payload = first[HEADER_SIZE + mlen :]
    return Message(kind, call_id, timeout, method, payload, frames[start + 1 :])


def _frames(
    kind: int, call_id: int, timeout: float, method: bytes, payload: bytes, bufs: list[Any]
) -> Frames:
    if len(payload) >= SPLIT_AT:
        return [
            HEADER.pack(MAGIC, kind, F_SPLIT, call_id, timeout, len(method)) + method,
            payload,
            *bufs,
        ]
    return [HEADER.pack(MAGIC, kind, 0, call_id, timeout, len(method)) + method + payload, *bufs]


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
    if not buffers:
        return pickle.loads(payload)
    return pickle.loads(payload, buffers=[_view(b) for b in buffers])


def request_frames(
    call_id: int, method: str, timeout: float, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Frames:
    """Frames of one call request."""
    payload, bufs = dumps((args, kwargs))
    return _frames(K_CALL, call_id, timeout, method.encode(), payload, bufs)


def reply_frames(kind: int, call_id: int, value: Any) -> Frames:
    """Frames of one reply (``value`` is pickled, or utf-8 text for K_FAULT)."""
    if kind == K_FAULT:
        return _frames(kind, call_id, 0.0, b"", str(value).encode(), [])
    payload, bufs = dumps(value)
    return _frames(kind, call_id, 0.0, b"", payload, bufs)


def send(sock: Any, frames: Frames, flags: int = 0, prefix: Any = None) -> None:
    """Send ``frames`` (after an optional routing ``prefix``): small frames copied, which
    is cheapest in pyzmq; large ones (payloads, array buffers) without a copy."""
    more = flags | SNDMORE
    if prefix is not None:
        sock.send(prefix, more)
    last = len(frames) - 1
    sock.send(frames[0], flags if last == 0 else more)
    for i in range(1, last + 1):
        sock.send(frames[i], flags if i == last else more, copy=False)


def batch_frame(messages: Sequence[bytes]) -> bytes:
    """One ``K_BATCH`` frame holding one-frame ``messages``."""
    parts = [HEADER.pack(MAGIC, K_BATCH, 0, len(messages), 0.0, 0)]
    pack = _LEN.pack
    for m in messages:
        parts.append(pack(len(m)))
        parts.append(m)
    return b"".join(parts)


def split_batch(msg: Message) -> list[Message] | None:
    """The messages of a parsed ``K_BATCH`` frame (views into it), skipping any that do
    not parse; None when the batch itself is malformed."""
    view = msg.payload
    count = msg.call_id
    if msg.kind != K_BATCH or msg.method or msg.buffers or not 0 < count <= BATCH_MAX:
        return None
    out = []
    at = 0
    end = len(view)
    for _ in range(count):
        if at + 4 > end:
            return None
        (n,) = _LEN.unpack_from(view, at)
        at += 4
        if at + n > end:
            return None
        part = parse((view[at : at + n],))
        if part is not None and part.kind != K_BATCH:
            out.append(part)
        at += n
    return out if at == end else None


def parse_replies(frames: Sequence[Any]) -> list[Message]:
    """The replies in received frames: one message, or each message of a batch."""
    msg = parse(frames)
    if msg is None:
        return []
    if msg.kind == K_BATCH:
        return split_batch(msg) or []
    return [msg]


def frames_nbytes(frames: Sequence[Any]) -> int:
    """Total size of a list of zmq frames / bytes."""
    return sum(len(f) if not isinstance(f, pickle.PickleBuffer) else f.raw().nbytes for f in frames)
