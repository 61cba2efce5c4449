"""A real Slurm cluster on this machine for the tests: munged, slurmctld and one slurmd
per node -- each in a test host of its own (a network namespace with its own address
and sshd, ``tests/backends/ssh/testhosts.py``), or all on this machine -- in one
temporary folder (its own munge key and socket, free ports, state, spool, logs and
pids), found by the Slurm commands through ``SLURM_CONF``.

Partitions: ``main`` (the default), ``short`` (``MaxTime=1``: one minute), ``graced``
(as ``main``, with a preemption grace time: ``GRACE_S``) and ``urgent`` (a higher
``PriorityTier`` that preempts the jobs of ``main`` and ``graced`` by requeueing
them). Node ``nK`` has the feature ``rackK`` (what ``--constraint`` and
``resources.host_labels`` name: a heterogeneous job's components), and the backfill
pass, which starts heterogeneous jobs, runs every 2 s. ``stop`` cancels every job, ends
the daemons by pid and then any step daemon (``slurmstepd``) of this cluster left, with
what it runs, found by its spool folder: nothing is left, nothing of another cluster on
the machine is touched.

It needs root (slurmd runs jobs as their user) and Debian's ``slurm-wlm`` and ``munge``;
``unavailable`` says why a cluster cannot start here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from topo.testing import wait_until

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "srun", "salloc", "scontrol", "squeue", "scancel", "sinfo")
CPUS = 4  # per fake node (more than the machine has: the tests' programs are small)
MEMORY_MB = 4000
UP_S = 60.0  # the daemons up and every node idle (seconds; about 1 on an idle machine)
STOP_S = 30.0
GRACE_S = 120  # partition graced's GraceTime: a preempted run snapshots and stops in it
SLURMD_PORT = 6818  # Slurm's own, for a slurmd alone in its test host


def unavailable() -> str | None:
    """Why no test cluster can start on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (slurmd runs jobs as their user)"
    missing = [c for c in (*DAEMONS, *COMMANDS) if _which(c) is None]
    if missing:
        names = ", ".join(missing)
        return f"Slurm or munge is not installed ({names} missing; ./dev test installs them)"
    return None


def _which(command: str) -> str | None:
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")


def free_ports(count: int) -> list[int]:
    """``count`` TCP ports free on this machine now."""
    socks, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class SlurmCluster:
    """A running test cluster (``start``): its folder, config, node names and daemons."""

    root: Path
    nodes: tuple[str, ...]
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    hosts: tuple[NodeHost, ...] = ()  # where each node's slurmd runs (``start``)
    ctld_address: str = "127.0.0.1"

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    def env(self) -> dict[str, str]:
        """The environment of a Slurm command on this cluster (no job of a caller's)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """A Slurm command (``scontrol``, ``sbatch`` ...) on this cluster."""
        return subprocess.run(
            list(args), env=self.env(), capture_output=True, text=True, timeout=timeout
        )

    def jobs(self) -> list[str]:
        """The ids of the jobs the controller knows and has not ended."""
        done = self.run("squeue", "-h", "-o", "%i")
        return done.stdout.split() if done.returncode == 0 else []

    def job_state(self, job: str) -> str:
        """A job's state (PENDING, RUNNING, COMPLETED ...; "" once forgotten)."""
        done = self.run("scontrol", "show", "job", "-o", job)
        for word in done.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def steps(self, job: str) -> list[str]:
        """The job's steps that run (``5.0``, ``5.batch``)."""
        done = self.run("squeue", "-h", "-s", "-j", job, "-o", "%i")
        return done.stdout.split() if done.returncode == 0 else []

    def stepds(self) -> list[psutil.Process]:
        """This cluster's step daemons (``slurmstepd``): those in the network namespace
        of one of its test hosts, or (slurmds on this machine) those with a socket in its
        spool."""
        spool = str(self.spool) + os.sep
        nets = {_netns(h.sshd_pid) for h in self.hosts if h.sshd_pid is not None} - {None}
        found = []
        for proc in psutil.process_iter(["name"]):
            if proc.info["name"] != "slurmstepd":
                continue
            if nets:
                if _netns(proc.pid) in nets:
                    found.append(proc)
                continue
            try:
                links = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in _fds(proc.pid)]
                unix = [c.laddr for c in proc.net_connections(kind="unix")]
            except (psutil.Error, OSError):
                continue
            if any(str(p).startswith(spool) for p in [*links, *unix]):
                found.append(proc)
        return found

    def processes(self) -> list[int]:
        """The pids of every process of this cluster: daemons, step daemons, their tasks."""
        pids: set[int] = set()
        roots = [p.pid for p in self.daemons.values() if p.poll() is None]
        roots += [p.pid for p in self.stepds()]
        for pid in roots:
            try:
                proc = psutil.Process(pid)
                pids |= {pid, *(c.pid for c in proc.children(recursive=True))}
            except psutil.NoSuchProcess:
                continue
        return sorted(pids)

    def stop(self) -> list[int]:
        """Cancel every job, end the daemons, then what is left of this cluster by pid;
        the pids still running after all that (none, normally)."""
        jobs = self.jobs()
        if jobs:
            self.run("scancel", *jobs)
            try:
                wait_until(lambda: not self.jobs(), STOP_S, what="the jobs to end")
            except AssertionError:
                pass
        for name in reversed(list(self.daemons)):  # slurmd first, munged last
            _end(self.daemons[name])
        left = self.processes()
        _kill(left)
        return [p for p in left if psutil.pid_exists(p) and not _zombie(p)]


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM a daemon, SIGKILL past STOP_S, reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_S)


def _kill(pids: Iterable[int]) -> None:
    """SIGKILL these pids (those still there), then wait for them to go."""
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.kill()
            procs.append(proc)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(procs, timeout=STOP_S)


@dataclass(frozen=True)
class NodeHost:
    """Where a node's slurmd runs: a test host (its namespaces, entered through its sshd's
    pid, and its address), or this machine (``sshd_pid`` None, 127.0.0.1)."""

    name: str  # the host's name (``topo-h7``)
    address: str
    sshd_pid: int | None = None


LOCAL = NodeHost("localhost", "127.0.0.1")


def config(
    root: Path,
    nodes: Iterable[tuple[str, int, NodeHost]],
    ctld_port: int,
    extra: Iterable[str] = (),
    ctld_address: str = "127.0.0.1",
    gpus: int = 0,
) -> str:
    """The slurm.conf of a cluster in ``root`` with these (node, slurmd port, host), the
    controller on ``ctld_address``, and ``extra`` lines (a test's own setting, e.g.
    ``SlurmctldParameters=...``); ``gpus``: that many GPUs on each node (``gres``)."""
    nodes = list(nodes)
    names = ",".join(n for n, _, _ in nodes)
    lines = [
        "ClusterName=topotest",
        f"SlurmctldHost={socket.gethostname()}({ctld_address})",
        f"SlurmctldPort={ctld_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge.socket'}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool' / '%n'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd-%n.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",  # more CPUs and memory than the machine has
        "PreemptType=preempt/partition_prio",
        "PreemptMode=REQUEUE",
        "SchedulerParameters=sched_interval=2,bf_interval=2",  # hetjobs start on backfill
        "MinJobAge=2",  # ended jobs are forgotten soon (squeue then lists only live ones)
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        *(["GresTypes=gpu"] if gpus else []),
        *extra,
    ]
    gres = f" Gres=gpu:{gpus}" if gpus else ""
    for i, (name, port, host) in enumerate(nodes, 1):
        lines.append(
            f"NodeName={name} NodeHostname={host.name} NodeAddr={host.address} Port={port} "
            f"CPUs={CPUS} RealMemory={MEMORY_MB} Features=rack{i}{gres} State=UNKNOWN"
        )
    lines += [
        f"PartitionName=main Nodes={names} Default=YES MaxTime=INFINITE State=UP "
        "PriorityTier=1 PreemptMode=REQUEUE",
        f"PartitionName=short Nodes={names} MaxTime=1 State=UP PriorityTier=1",
        f"PartitionName=graced Nodes={names} MaxTime=INFINITE State=UP PriorityTier=1 "
        f"PreemptMode=REQUEUE GraceTime={GRACE_S}",
        f"PartitionName=urgent Nodes={names} MaxTime=INFINITE State=UP PriorityTier=10 "
        "PreemptMode=OFF",
    ]
    return "\n".join(lines) + "\n"


def start(
    root: Path,
    nodes: tuple[str, ...] = ("n1", "n2"),
    extra: tuple[str, ...] = (),
    hosts: tuple[NodeHost, ...] = (),
    ctld_address: str = "127.0.0.1",
    gpus: int = 0,
) -> SlurmCluster:
    """A cluster of ``nodes`` in the (empty) folder ``root`` (``extra``: more lines of
    its slurm.conf), up with every node idle; stopped (nothing left) and
    ``RuntimeError`` with the daemons' logs if it cannot. ``hosts``: the i-th node's
    slurmd runs in the i-th test host (its network, mount and UTS namespaces), the
    controller listening on ``ctld_address`` (the test hosts' bridge); without them
    every slurmd runs on this machine. ``gpus``: each node has that many GPUs for Slurm
    to give out (``gpus``' devices: stand-ins for ``/dev/nvidiaN``)."""
    if hosts and len(hosts) != len(nodes):
        raise ValueError(f"{len(nodes)} nodes need as many test hosts, not {len(hosts)}")
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", *(f"spool/{n}" for n in nodes)):
        (root / sub).mkdir(exist_ok=True)
    cluster = SlurmCluster(root, nodes, hosts=hosts or tuple(LOCAL for _ in nodes))
    cluster.ctld_address = ctld_address
    try:
        if gpus:
            gpu_devices(root, gpus)
        _start(cluster, extra, gpus)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def gpu_devices(root: Path, count: int) -> None:
    """``root``/dev/nvidia0..: what Slurm takes for a node's GPUs (character devices:
    slurmd refuses other files; each is /dev/null's, which nothing here opens as a GPU),
    and the gres.conf beside slurm.conf that names them."""
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(count):
        os.mknod(dev / f"nvidia{i}", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (root / "gres.conf").write_text(f"Name=gpu File={dev}/nvidia[0-{count - 1}]\n")


def _start(cluster: SlurmCluster, extra: tuple[str, ...], gpus: int = 0) -> None:
    root = cluster.root
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = root / "munge.socket"
    log = open(root / "daemons.out", "ab")  # what the daemons print before their logs
    munged = [
        _which("munged") or "munged",
        "--foreground",
        f"--socket={socket_path}",
        f"--key-file={key}",
        f"--pid-file={root / 'munged.pid'}",
        f"--log-file={root / 'munged.log'}",
        f"--seed-file={root / 'munged.seed'}",
        "--force",
    ]
    cluster.daemons["munged"] = subprocess.Popen(munged, stdout=log, stderr=log)
    _wait(cluster, lambda: socket_path.exists(), "munged's socket")
    ports = free_ports(1 + len(cluster.nodes))
    # (in a test host of its own, each slurmd has that host's ports: Slurm's own)
    pairs = zip(cluster.hosts, ports[1:], strict=True)
    slurmd_ports = [SLURMD_PORT if h.sshd_pid else p for h, p in pairs]
    nodes = zip(cluster.nodes, slurmd_ports, cluster.hosts, strict=True)
    cluster.conf.write_text(config(root, nodes, ports[0], extra, cluster.ctld_address, gpus))
    env = cluster.env()
    cluster.daemons["slurmctld"] = subprocess.Popen(
        [_which("slurmctld") or "slurmctld", "-D", "-i", "-f", str(cluster.conf)],
        stdout=log,
        stderr=log,
        env=env,
    )
    _wait(cluster, lambda: cluster.run("scontrol", "ping").stdout.count("UP") > 0, "slurmctld")
    for node, host in zip(cluster.nodes, cluster.hosts, strict=True):
        enter = [] if host.sshd_pid is None else _enter(host.sshd_pid)
        cluster.daemons[f"slurmd-{node}"] = subprocess.Popen(
            [*enter, _which("slurmd") or "slurmd", "-D", "-N", node, "-f", str(cluster.conf)],
            stdout=log,
            stderr=log,
            env=env,
        )
    log.close()
    _wait(cluster, lambda: _idle(cluster), "every node idle")


def _netns(pid: int) -> str | None:
    """The network namespace of process ``pid`` (``net:[4026532...]``; None: gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _enter(sshd_pid: int) -> list[str]:
    """The command prefix that runs a command inside the test host of that sshd: its
    network and UTS namespaces (its address, its hostname). Not its mount namespace:
    slurmd needs the machine's ``/sys/fs/cgroup``, which is not mounted there."""
    return ["nsenter", "-t", str(sshd_pid), "-n", "-u"]


def _idle(cluster: SlurmCluster) -> bool:
    done = cluster.run("sinfo", "-h", "-N", "-p", "main", "-o", "%N %t")
    states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    return set(states) == set(cluster.nodes) and set(states.values()) == {"idle"}


def _wait(cluster: SlurmCluster, ready: object, what: str) -> None:
    """Wait for ``ready()``; a daemon that ended, or the time out, raise with the logs."""

    def check() -> bool:
        ended = [n for n, p in cluster.daemons.items() if p.poll() is not None]
        if ended:
            raise RuntimeError(f"{', '.join(ended)} ended: {_logs(cluster.root)}")
        return bool(ready())  # type: ignore[operator]

    try:
        wait_until(check, UP_S, what=what, every=0.1)
    except AssertionError as exc:
        raise RuntimeError(f"{exc}: {_logs(cluster.root)}") from None


def _logs(root: Path) -> str:
    """The last lines of the daemons' logs, for an error."""
    out = []
    for path in [*sorted(root.glob("*.log")), root / "daemons.out"]:
        if path.is_file():
            tail = path.read_text(errors="replace").splitlines()[-8:]
            out.append(f"--- {path.name}\n" + "\n".join(tail))
    return "\n".join(out)
