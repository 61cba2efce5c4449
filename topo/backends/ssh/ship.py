"""``--ship``: the working tree copied into each host's workdir over SFTP, for hosts
that do not share the launcher's filesystem.

The launcher packs its working directory once (sources and data; no virtual
environments, caches, VCS metadata or run directories), copies the archive to every
host and unpacks it into ``<workdir>/project`` with the host's own Python, replacing
what an earlier run shipped. The agent then runs there with that directory first on
``PYTHONPATH``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from topo.backends.shipping import SKIP_DIRS, SKIP_SUFFIXES
from topo.backends.ssh.inventory import HostSpec
from topo.backends.ssh.session import Sessions

MAX_BYTES = 512 << 20  # refuse to ship a tree larger than this (a data directory left in?)


class ShipError(RuntimeError):
    """The working tree could not be packed or copied."""


def project_dir(host: HostSpec) -> str:
    """Where a host keeps the shipped tree."""
    return f"{host.workdir.rstrip('/')}/project"


def pack(root: Path, into: Path) -> tuple[Path, int]:
    """``root`` as a gzipped tar in directory ``into``: its path and how many files."""
    files = 0
    size = 0
    archive = into / "project.tar.gz"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        nonlocal files, size
        name = os.path.basename(info.name)
        if info.isdir() and name in SKIP_DIRS:
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
        return info

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname=".", filter=keep)
    return archive, files


_UNPACK = (
    "import shutil, sys, tarfile; dst, src = sys.argv[1], sys.argv[2]; "
    "shutil.rmtree(dst, ignore_errors=True); "
    "tarfile.open(src).extractall(dst, filter='data')"
)


def ship(sessions: Sessions, hosts: Mapping[str, HostSpec], root: Path) -> dict[str, str]:
    """Copy ``root`` to every host in ``hosts``; the hosts where it failed, with why."""
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="topo-ship-") as tmp:
        archive, _count = pack(root, Path(tmp))
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:12]
        commands = {}
        for name, host in hosts.items():
            remote = f"{host.workdir.rstrip('/')}/project-{digest}.tar.gz"
            try:
                sessions.run(name, f"mkdir -p {shlex.quote(host.workdir)}", 30)
                sessions.put(name, archive, remote)
            except Exception as exc:  # SFTP errors come in many types
                failed[name] = f"could not copy the working tree: {exc}"
                continue
            dst, src = shlex.quote(project_dir(host)), shlex.quote(remote)
            unpack = shlex.quote(_UNPACK)
            commands[name] = f"{shlex.quote(host.python)} -c {unpack} {dst} {src} && rm -f {src}"
        for name, (status, _out, err) in sessions.run_all(commands, 120).items():
            if status != 0:
                failed[name] = f"could not unpack the working tree: {err.strip() or status}"
    return failed
