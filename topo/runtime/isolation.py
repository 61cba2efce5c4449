"""A private network namespace for one process: nothing but its own loopback.

A server that listens on every interface and authenticates nobody (Reverb's) is put
where no other host and no other local user can reach its port: a new network
namespace whose only interface is ``lo``. As root that is ``unshare(CLONE_NEWNET)``;
as any other user a new user namespace comes with it (the user keeps its own uid
inside), where the kernel allows unprivileged user namespaces. Unix sockets live in
the file system, not in the namespace, so a relay in the same process can still
serve the world outside through a socket in a private directory.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_probe_result: tuple[int, str | None] | None = None  # (pid, why not) of the last probe


def _unshare(flags: int) -> int:
    """``unshare(2)``; 0 or the errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) == 0:
        return 0
    return ctypes.get_errno()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _map_own_ids(uid: int, gid: int) -> None:
    """Inside a new user namespace: keep the uid and gid we had (files we create stay
    ours, and a socket's owner is the same user outside)."""
    try:
        _write("/proc/self/setgroups", "deny")
    except FileNotFoundError:  # kernels before 3.19 have no setgroups file
        pass
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _loopback_up() -> None:
    """Bring up ``lo`` of the current network namespace (it starts down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def isolate() -> str | None:
    """Move the calling process into a new network namespace with only ``lo``, up.

    The process must have a single thread (a new user namespace demands it). Returns
    None once done, else why it could not be done (the process is then unchanged, or
    in a namespace of its own without a working loopback: it must not serve then)."""
    uid, gid = os.geteuid(), os.getegid()
    tried = []
    attempts = [CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET] if uid == 0 else []
    attempts = attempts or [CLONE_NEWUSER | CLONE_NEWNET]
    for flags in attempts:
        err = _unshare(flags)
        if err:
            what = "a network namespace" if flags == CLONE_NEWNET else "a user+network namespace"
            tried.append(f"{what}: {os.strerror(err)} ({errno.errorcode.get(err, err)})")
            continue
        try:
            if flags & CLONE_NEWUSER:
                _map_own_ids(uid, gid)
            _loopback_up()
        except OSError as exc:
            return f"in a new network namespace the loopback could not be set up ({exc})"
        return None
    return "could not make " + "; nor ".join(tried)


def isolation_unavailable() -> str | None:
    """Why :func:`isolate` cannot work on this host for this user (None: it can), tried
    once per process in a short-lived child."""
    global _probe_result
    if _probe_result is not None and _probe_result[0] == os.getpid():
        return _probe_result[1]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read)
            why = isolate()
            os.write(write, (why or "").encode()[:4000])
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        text = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    why = text or None
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        why = why or "the namespace probe failed"
    _probe_result = (os.getpid(), why)
    return why
