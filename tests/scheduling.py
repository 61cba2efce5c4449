"""How the suite shares this machine when it runs on several workers (pytest-xdist), and
the record each run leaves of its slowest tests.

* The tests that use a machine-wide resource, the SSH test hosts (network namespaces
  ``topo-h1..3``) or a Ray cluster (the test clusters, or the one ``ray`` starts on its
  own), are one unit of work (``MachineScheduling``): one worker runs them one after
  another, so two never hold the hosts or a Ray cluster at once, and it starts with them,
  the longest chain of the run, while the other workers share the rest test by test.
* The tests of the Slurm backend share one test cluster per worker run (a session
  fixture: tests/backends/slurm/cluster.py) and its few CPUs: they are one unit too
  (``SLURM_GROUP``), run in turn by one worker beside the machine's unit.
  xdist's own ``--dist loadgroup`` would do it with a mark, but with pytest 9.2 its
  groups are silently lost (pytest-dev/pytest-xdist#1386), so the unit is known by the
  test's id, and collection checks that every test using those fixtures is known so.
* Every run writes its slowest tests and its total (``TOPO_TEST_REPORT``, default
  ``test-results/durations.md``; every test's time beside it, ``durations.json``) and
  names the file at the end of its output; each failure goes to ``failures.txt`` beside
  it as it happens, so a run cut short still says what broke.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pytest

MACHINE_GROUP = "machine"  # the test hosts and Ray clusters: one at a time
MACHINE_FIXTURES = {"test_hosts", "ssh_hosts", "ray_cluster", "ray_hosts"}
MACHINE_DIRS = ("tests/backends/ssh/", "tests/backends/ray/")
SLURM_GROUP = "slurm"  # the Slurm test cluster: its tests one at a time
SLURM_FIXTURES = {"slurm_cluster", "slurm_allocation"}
SLURM_DIR = "tests/backends/slurm/"
SLOWEST = 30
ROOT = Path(__file__).resolve().parent.parent


def on_the_machine(nodeid: str) -> bool:
    """Whether the test ``nodeid`` uses the test hosts or a Ray cluster, by its id alone
    (what the scheduler has): a test under tests/backends/ssh or tests/backends/ray, or
    one run with the ray or ssh backend (``[ray]``, ``[...-ray-...]``)."""
    path, _, rest = nodeid.partition("::")
    if path.startswith(MACHINE_DIRS):
        return True
    params = rest[rest.find("[") + 1 : -1] if rest.endswith("]") else ""
    return any(p in ("ray", "ssh") for p in params.split("-"))


def on_slurm(nodeid: str) -> bool:
    """Whether the test ``nodeid`` is one of the Slurm test cluster's (by its folder)."""
    return nodeid.startswith(SLURM_DIR)


def unit_of(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: the machine's, the Slurm cluster's, or
    its own."""
    if on_the_machine(nodeid):
        return MACHINE_GROUP
    return SLURM_GROUP if on_slurm(nodeid) else nodeid


def uses_the_machine(item: pytest.Item) -> bool:
    """Whether ``item`` asks for the test hosts or a Ray cluster."""
    return bool(MACHINE_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The machine's tests first (one worker starts with them: the longest chain of the
    run), then the Slurm cluster's (another starts with those), the others in their
    order. A test that uses the machine or the Slurm cluster where its id does not say
    so would run beside another one: it is refused, with what to do."""
    unknown = [i.nodeid for i in items if uses_the_machine(i) and not on_the_machine(i.nodeid)]
    if unknown:
        raise pytest.UsageError(
            "these tests use the SSH test hosts or a Ray cluster but are not under "
            f"{' or '.join(MACHINE_DIRS)} (where one worker runs them one at a time): "
            f"{', '.join(unknown)}; move them there (tests/scheduling.py)"
        )
    astray = [
        i.nodeid
        for i in items
        if SLURM_FIXTURES & set(getattr(i, "fixturenames", ())) and not on_slurm(i.nodeid)
    ]
    if astray:
        raise pytest.UsageError(
            f"these tests use the Slurm test cluster but are not under {SLURM_DIR} (where one "
            f"worker runs them one at a time): {', '.join(astray)}; move them there "
            "(tests/scheduling.py)"
        )
    machine = [item for item in items if on_the_machine(item.nodeid)]
    for item in machine:  # they start hosts and clusters: never in the quick loop
        item.add_marker(pytest.mark.slow)
    slurm = [item for item in items if on_slurm(item.nodeid)]  # the next longest chain
    chosen = set(map(id, machine + slurm))
    items[:] = machine + slurm + [item for item in items if id(item) not in chosen]


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # a hook of xdist's, where installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n N`` (``--dist load``): the machine's tests as one unit, the Slurm
    cluster's as another, every other test a unit of its own."""
    if config.getvalue("dist") != "load":
        return None  # --dist each, loadfile, ...: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class MachineScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return MachineScheduling(config, log)


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have been waited for: a test's
    own threads and the processes it started and reaped (a detached launcher, a Ray
    cluster's daemons and whatever runs on the test hosts are not counted)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


CPU_MARK = pytest.StashKey[float]()


def machine_cpu() -> tuple[float, float]:
    """The machine's CPU time so far, (busy, all) in clock ticks of every CPU together
    (/proc/stat; zeros where there is none): how busy the cores were across a run, the
    test hosts', Ray's and Slurm's processes included."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle and iowait
    return sum(fields) - idle, sum(fields)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each phase's report carries the CPU seconds spent since the last one (on the
    worker that ran it; the controller adds them up in the record)."""
    report = yield
    now = cpu_seconds()
    report.user_properties.append(("cpu_s", now - item.stash.get(CPU_MARK, now)))
    item.stash[CPU_MARK] = now
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The test's CPU count starts here."""
    item.stash[CPU_MARK] = cpu_seconds()


class DurationRecord:
    """Each test's time (setup, call and teardown together) as its reports come in, on
    the controller when the run has workers; the slowest and the total at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failures = path.with_name("failures.txt")
        self.started = time.monotonic()
        self.machine_at_start = machine_cpu()
        self.seconds: dict[str, float] = {}
        self.outcomes: dict[str, str] = {}
        self.cpu: dict[str, float] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self.failures.write_text("")

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        cpu = sum(v for k, v in report.user_properties if k == "cpu_s")
        self.cpu[report.nodeid] = self.cpu.get(report.nodeid, 0.0) + cpu
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = report.outcome
        if report.failed:  # written as it happens: a run cut short still says what broke
            with self.failures.open("a") as f:
                f.write(f"=== {report.nodeid} ({report.when}, {time.strftime('%H:%M:%S')})\n")
                f.write(f"{report.longreprtext}\n{report.capstderr[-4000:]}\n")

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        wall = time.monotonic() - self.started
        workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT") or str(
            getattr(terminalreporter.config.option, "numprocesses", None) or 1
        )
        slowest = sorted(self.seconds.items(), key=lambda kv: kv[1], reverse=True)[:SLOWEST]
        machine = [v for k, v in self.seconds.items() if on_the_machine(k)]
        (busy0, all0), (busy1, all1) = self.machine_at_start, machine_cpu()
        busy = f"{100 * (busy1 - busy0) / (all1 - all0):.0f} %" if all1 > all0 else "unknown"
        lines = [
            "# Test durations",
            "",
            f"{len(self.seconds)} tests in {wall:.0f} s wall ({wall / 60:.1f} min) on "
            f"{workers} worker(s); {sum(self.seconds.values()):.0f} s of test time in all; "
            f"load average {os.getloadavg()[0]:.2f} at the end. The {len(machine)} tests "
            f"on the test hosts and Ray clusters, one after another: {sum(machine):.0f} s. "
            f"The machine's {os.cpu_count()} CPUs were busy {busy} of the run (all its "
            "processes, the tests' and anyone else's).",
            "",
            f"| the {len(slowest)} slowest | outcome | seconds |",
            "| --- | --- | ---: |",
            *(f"| {k} | {self.outcomes.get(k, '?')} | {v:.2f} |" for k, v in slowest),
            "",
            f"CPU seconds counted (each test's own and its reaped processes'; not a detached "
            f"launcher's, a Ray cluster's or the test hosts'): {sum(self.cpu.values()):.0f} s.",
            "",
            f"| the {SLOWEST} most CPU | CPU seconds | seconds |",
            "| --- | ---: | ---: |",
            *(
                f"| {k} | {v:.2f} | {self.seconds.get(k, 0.0):.2f} |"
                for k, v in sorted(self.cpu.items(), key=lambda kv: kv[1], reverse=True)[:SLOWEST]
            ),
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(lines) + "\n")
        every = {k: round(v, 3) for k, v in sorted(self.seconds.items())}
        self.path.with_suffix(".json").write_text(json.dumps(every, indent=0) + "\n")
        cpu = {k: round(v, 3) for k, v in sorted(self.cpu.items())}
        self.path.with_name("cpu.json").write_text(json.dumps(cpu, indent=0) + "\n")
        terminalreporter.write_line(f"test durations: {self.path} ({wall:.0f} s wall)")


def pytest_configure(config: pytest.Config) -> None:
    """The record is kept by the process that sees every report (not by a worker)."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    default = ROOT / "test-results" / "durations.md"
    path = Path(os.environ.get("TOPO_TEST_REPORT") or default)
    config.pluginmanager.register(DurationRecord(path), "topo-durations")
