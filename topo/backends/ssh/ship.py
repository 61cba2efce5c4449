"""``--ship``: the project's import roots copied into each host's workdir over SFTP, for
hosts that do not share the launcher's filesystem.

The launcher packs each root (the folders the targets import from: sources and data; no
virtual environments, caches, VCS metadata or run directories) once, the same way every
time, so that the archive's digest names its content. A host unpacks it into
``<workdir>/project-<digest>``: extracted beside it under a name of its own, then renamed
into place in one step. Hosts that share a workdir (a shared home, NFS) therefore never
write the same file: the first to finish puts the tree there, the others find it (or
drop their own copy when another host's rename came first), and a tree that is there is
never replaced or deleted, so a run that uses it (on any host) keeps it. An unchanged
tree is not copied again; a changed one gets a new directory beside the earlier ones.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import secrets
import shlex
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from topo.backends.shipping import SKIP_DIRS, SKIP_SUFFIXES
from topo.backends.ssh.inventory import HostSpec
from topo.backends.ssh.session import Sessions
from topo.rundir.layout import safe_name

MAX_BYTES = 512 << 20  # refuse to ship a tree larger than this (a data directory left in?)
DIGEST_CHARS = 16


class ShipError(RuntimeError):
    """The working tree could not be packed or copied."""


def project_dir(host: HostSpec, digest: str) -> str:
    """Where a host keeps the shipped tree of digest ``digest``."""
    return f"{host.workdir.rstrip('/')}/project-{digest}"


def pack(root: Path, into: Path) -> tuple[Path, int]:
    """``root`` as a gzipped tar in directory ``into``: its path and how many files. The
    same content gives the same bytes (sorted entries, no owners, no times)."""
    files = 0
    size = 0
    archive = into / f"{safe_name(root.name or 'root')}-{secrets.token_hex(4)}.tar.gz"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        nonlocal files, size
        name = os.path.basename(info.name)
        if (info.isdir() and name in SKIP_DIRS) or name == ".git":  # a worktree's .git file
            return None
        if name.endswith(SKIP_SUFFIXES) or not (info.isdir() or info.isfile()):
            return None
        if info.isfile():
            files += 1
            size += info.size
            if size > MAX_BYTES:
                raise ShipError(
                    f"{root} holds more than {MAX_BYTES >> 20} MiB; ship a smaller tree "
                    "(run from the project's directory) or install the project on the hosts"
                )
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0  # named by its content: a touched or re-saved file is the same tree
        return info

    with open(archive, "wb") as raw, gzip.GzipFile("", "wb", fileobj=raw, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(root, arcname=".", filter=keep)  # tarfile adds a directory sorted
    return archive, files


def digest_of(archive: Path) -> str:
    """The name of an archive's content."""
    sha = hashlib.sha256()
    with open(archive, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:DIGEST_CHARS]


# Run by the host's python: unpack archive SRC as directory DST, unless DST is there
# already. Extracted into a directory of its own beside DST, renamed into place in one
# step; if another host's rename came first, this copy is dropped. DST is never removed.
_UNPACK = """
import os, shutil, sys, tarfile, tempfile
dst, src = sys.argv[1], sys.argv[2]
try:
    if not os.path.isdir(dst):
        part = tempfile.mkdtemp(prefix=os.path.basename(dst) + ".", suffix=".part",
                                dir=os.path.dirname(dst))
        try:
            with tarfile.open(src) as tar:
                tar.extractall(part, filter="data")
            try:
                os.rename(part, dst)
            except OSError:
                if not os.path.isdir(dst):
                    raise
        finally:
            shutil.rmtree(part, ignore_errors=True)
    os.utime(dst)  # when it was last used: what a person clearing old trees looks at
finally:
    try:
        os.unlink(src)
    except FileNotFoundError:
        pass
"""


def ship(
    sessions: Sessions, hosts: Mapping[str, HostSpec], roots: list[Path]
) -> tuple[list[str], dict[str, str]]:
    """Copy each of ``roots`` to every host in ``hosts``: the digests of the roots (in
    their order: each host's ``project_dir``) and the hosts where it failed, with why."""
    failed: dict[str, str] = {}
    digests: list[str] = []
    with tempfile.TemporaryDirectory(prefix="topo-ship-") as tmp:
        archives = []
        for root in roots:
            archive, _count = pack(root, Path(tmp))
            archives.append(archive)
            digests.append(digest_of(archive))
        for archive, digest in zip(archives, digests, strict=True):
            left = {n: h for n, h in hosts.items() if n not in failed}
            _ship_one(sessions, left, archive, digest, failed)
    return digests, failed


def _ship_one(
    sessions: Sessions,
    hosts: Mapping[str, HostSpec],
    archive: Path,
    digest: str,
    failed: dict[str, str],
) -> None:
    """One archive to ``hosts`` that lack its tree; failures into ``failed``."""
    look = {
        n: f"mkdir -p {shlex.quote(h.workdir)} && test -d {shlex.quote(project_dir(h, digest))}"
        for n, h in hosts.items()
    }
    commands = {}
    for name, (status, _out, _err) in sessions.run_all(look, 30).items():
        host = hosts[name]
        dst = shlex.quote(project_dir(host, digest))
        unpack = f"{shlex.quote(host.python)} -c {shlex.quote(_UNPACK)} {dst}"
        if status == 0:  # there already (an earlier run, or a host sharing the workdir)
            commands[name] = f"touch {dst}"  # last used now (for whoever clears old trees)
            continue
        # A name of its own per host and run: hosts sharing the workdir never write one file.
        token = secrets.token_hex(4)
        remote = f"{host.workdir.rstrip('/')}/.project-{digest}.{safe_name(name)}.{token}.tar.gz"
        try:
            sessions.put(name, archive, remote)
        except Exception as exc:  # SFTP errors come in many types
            failed[name] = f"could not copy the working tree: {exc}"
            continue
        commands[name] = f"{unpack} {shlex.quote(remote)}"
    for name, (status, _out, err) in sessions.run_all(commands, 120).items():
        if status != 0:
            lines = [x.strip() for x in err.splitlines() if x.strip()]
            failed[name] = f"could not unpack the working tree: {lines[-1] if lines else status}"
