"""Where a command's CPU goes, by kind of process: the test suite's (Ray's daemons, topo's
launchers, fork servers and nodes, the browser, Slurm, sshd ...), for making it faster.

    python bench/suite_cpu.py --out bench/results/suite-cpu.md -- bash .ci/run

Turns on the kernel's process accounting (BSD acct v3, root only) for as long as the
command runs: every process that ends in that time leaves its short name (``comm``), its
CPU time and its parent; the summary groups them by kind. It is the whole machine's
(anyone else's processes too); processes still running at the end are not in it.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORD = struct.Struct("<BBHIIIIIIf8H16s")  # struct acct_v3 (linux/acct.h): 64 bytes
AHZ = 100  # comp_t ticks per second
KINDS = [  # (kind, pattern on the short name), first match wins
    ("topo launcher", r"^topo: run "),
    ("topo agent (ssh/slurm/ray)", r"^topo:? ?agent"),
    ("topo node or fork server", r"^topo"),
    ("ray daemon or worker", r"^(ray::|raylet|gcs_server|ray |dashboard|log_monitor)"),
    ("browser (chromium, playwright)", r"^(chrom|headless|node$|playwright)"),
    ("slurm and munge", r"^(slurm|srun|sbatch|squeue|scontrol|scancel|sinfo|munge)"),
    ("ssh", r"^(sshd?|ssh-)"),
    ("python (tests, CLI, not yet titled)", r"^python"),
    ("shell and tools", r"^(bash|sh|ip|ps|git|timeout|tmux|flock|yes|nsenter|uv|ruff|dot)$"),
]


def comp(value: int) -> float:
    """A comp_t (13-bit mantissa, 3-bit base-8 exponent) in seconds."""
    return ((value & 0x1FFF) << (3 * (value >> 13))) / AHZ


def records(path: Path) -> list[tuple[str, int, int, float]]:
    """(short name, pid, parent pid, CPU seconds) of every process in ``path``."""
    data = path.read_bytes()
    out = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        version = fields[1] & 0x0F
        if version != 3:
            continue
        pid, ppid = fields[6], fields[7]
        utime, stime = fields[10], fields[11]
        name = fields[18].split(b"\0", 1)[0].decode(errors="replace")
        out.append((name, pid, ppid, comp(utime) + comp(stime)))
    return out


def kind(name: str) -> str:
    """The kind of a process by its short name."""
    for label, pattern in KINDS:
        if re.search(pattern, name):
            return label
    return "other"


def summary(rows: list[tuple[str, int, int, float]], wall: float, command: list[str]) -> str:
    """A markdown table: CPU seconds and processes by kind, the busiest names."""
    by_kind: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    by_name: dict[str, float] = collections.defaultdict(float)
    for name, _pid, _ppid, cpu in rows:
        by_kind[kind(name)] += cpu
        count[kind(name)] += 1
        by_name[name] += cpu
    total = sum(by_kind.values())
    cores = os.cpu_count() or 1
    lines = [
        f"# CPU by kind of process: `{' '.join(command)}`",
        "",
        f"{len(rows)} processes ended in {wall:.0f} s wall; {total:.0f} CPU seconds in all "
        f"({100 * total / (wall * cores):.0f} % of {cores} cores' time).",
        "",
        "| kind | CPU seconds | share | processes |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {k} | {v:.1f} | {100 * v / max(total, 1e-9):.0f} % | {count[k]} |"
            for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
        ),
        "",
        "| the 25 busiest short names | CPU seconds |",
        "| --- | ---: |",
        *(f"| `{k}` | {v:.1f} |" for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])[:25]),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/suite-cpu.md"))
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    log = Path(tempfile.mkdtemp(prefix="topo-acct-")) / "pacct"
    log.touch()
    if libc.acct(str(log).encode()) != 0:
        sys.exit(f"process accounting could not start: {os.strerror(ctypes.get_errno())}")
    started = time.monotonic()
    try:
        code = subprocess.call(args.command)
    finally:
        libc.acct(None)
    wall = time.monotonic() - started
    text = summary(records(log), wall, args.command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
