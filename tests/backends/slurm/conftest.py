"""Fixtures of the Slurm tests: one real test cluster per session (``cluster.py``), each
test checked to leave no job and no step behind, and an allocation like ``salloc``'s
to run things in. Skipped, with the reason, where no cluster can start (not root, or
Slurm and munge not installed). One xdist worker runs these tests in turn
(tests/scheduling.py)."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.backends.slurm import cluster
from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.ssh import testhosts
from tests.backends.ssh.testhosts import NET, HostSet
from topo.testing import wait_until

CLEAN_S = 60.0  # a test's jobs and steps gone (seconds; scancel takes about 1)


@pytest.fixture(scope="session")
def slurm_session(request: pytest.FixtureRequest) -> Iterator[SlurmCluster]:
    """The session's test cluster (nodes n1, n2: one slurmd in each of the test hosts
    ``topo-h7`` and ``h8``, the controller on their bridge; on this machine where no
    test host can be made), stopped with nothing left at the end."""
    why = cluster.unavailable()
    if why is not None:
        pytest.skip(why)
    hosts: tuple[cluster.NodeHost, ...] = ()
    if testhosts.unavailable() is None:
        held: HostSet = request.getfixturevalue("slurm_test_hosts")
        hosts = tuple(
            cluster.NodeHost(name, address, held.sshd_pids(name)[0])
            for name, address in zip(held.names, held.addresses, strict=True)
        )
    ctld = f"{NET}.1" if hosts else "127.0.0.1"  # (the test hosts' bridge)
    with own_cluster(hosts=hosts, ctld_address=ctld) as running:
        yield running


@contextlib.contextmanager
def own_cluster(**options: Any) -> Iterator[SlurmCluster]:
    """A test cluster (``cluster.start``'s ``options``) in a folder of its own, stopped
    with nothing left and its folder removed at the end; the test fails if it cannot
    start."""
    root = Path(tempfile.mkdtemp(prefix="topo-slurm-"))
    try:
        running = cluster.start(root, **options)
    except RuntimeError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"the Slurm test cluster did not start: {exc}")
    try:
        yield running
    finally:
        left = running.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not left, f"the Slurm test cluster left processes: {left}"


def _live_command(proc: psutil.Process) -> str | int | None:
    """A process's command line (its pid when it has none); None once it ended, a zombie
    not yet reaped by its slurmd included."""
    try:
        return " ".join(proc.cmdline()) or proc.pid
    except psutil.Error:  # ended meanwhile (NoSuchProcess, ZombieProcess)
        return None


def leftovers(slurm: SlurmCluster, timeout: float = CLEAN_S) -> dict[str, object]:
    """What is left on the cluster after ``timeout``: jobs, steps' daemons (and what they
    run); empty when nothing."""

    def found() -> dict[str, object]:
        out: dict[str, object] = {}
        jobs = slurm.jobs()
        if jobs:
            out["jobs"] = jobs
        stepds = [d for d in map(_live_command, slurm.stepds()) if d is not None]
        if stepds:
            out["slurmstepd"] = stepds
        return out

    try:
        wait_until(lambda: not found(), timeout, what="no job or step left", every=0.2)
    except AssertionError:
        return found()
    return {}


@pytest.fixture
def slurm_cluster(slurm_session: SlurmCluster) -> Iterator[SlurmCluster]:
    """The test cluster, checked to run no job and no step once the test is over (what
    a failed test left is cancelled, so that the next one starts clean)."""
    yield slurm_session
    left = leftovers(slurm_session)
    if left:
        jobs = slurm_session.jobs()
        if jobs:
            slurm_session.run("scancel", *jobs)
        leftovers(slurm_session)
    assert not left, f"left on the Slurm test cluster: {left}"


@dataclass(frozen=True)
class Allocation:
    """A job that holds nodes and runs nothing (``salloc --no-shell``), to run steps in."""

    cluster: SlurmCluster
    job: str
    nodes: tuple[str, ...]

    def env(self) -> dict[str, str]:
        """The environment of a shell inside the allocation (as salloc gives its shell)."""
        return {
            **self.cluster.env(),
            "SLURM_JOB_ID": self.job,
            "SLURM_JOBID": self.job,
            "SLURM_JOB_NODELIST": ",".join(self.nodes),
            "SLURM_JOB_NUM_NODES": str(len(self.nodes)),
        }


def allocate(slurm: SlurmCluster, *args: str) -> Allocation:
    """A running allocation (``salloc --no-shell ARGS``) of the cluster."""
    done = slurm.run("salloc", "--no-shell", "-J", "topo-test", *args, timeout=120)
    found = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert done.returncode == 0 and found, done.stderr
    job = found.group(1)
    wait_until(lambda: slurm.job_state(job) == "RUNNING", 60, what=f"job {job} running")
    shown = slurm.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
    names = slurm.run("scontrol", "show", "hostnames", shown).stdout.split()
    return Allocation(slurm, job, tuple(names))


@pytest.fixture
def slurm_allocation(slurm_cluster: SlurmCluster) -> Iterator[Allocation]:
    """Both nodes of the test cluster held by one job, cancelled after the test."""
    held = allocate(slurm_cluster, "-N2")
    yield held
    slurm_cluster.run("scancel", held.job)
