"""How the suite shares this machine when it runs on several workers (pytest-xdist), and
the record each run leaves of its slowest tests.

* The tests that use a machine-wide resource are units of work (``MachineScheduling``),
  each run by one worker, one test after another: the ssh tests (the SSH test hosts
  ``topo-h1..3``), the Ray tests (a Ray cluster: the test clusters, on test hosts
  ``topo-h4..6`` of their own, or the one ``ray`` starts on its own) and the Slurm tests
  (one test cluster per worker run, a session fixture: tests/backends/slurm/cluster.py,
  and its few CPUs). The three units start first, on three workers, side by side (the
  longest chains of the run), while the workers share the rest test by test, the slow
  ones first (the quick ones fill the workers up at the end).
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

from tests.idleness import Sampler, idle_report

# unit -> (its folder, the backend parameter that puts a test elsewhere in it, the
# fixtures only its tests may use); the ssh and ray units are "the machine's"
UNITS = {
    "ray": ("tests/backends/ray/", "ray", {"ray_cluster", "ray_hosts", "ray_test_hosts"}),
    "ssh": ("tests/backends/ssh/", "ssh", {"test_hosts", "ssh_hosts"}),
    "slurm": (
        "tests/backends/slurm/",
        None,
        {"slurm_cluster", "slurm_allocation", "slurm_session", "slurm_test_hosts"},
    ),
}
MACHINE_UNITS = ("ray", "ssh")
SLURM_DIR = UNITS["slurm"][0]
SLOWEST = 30
ROOT = Path(__file__).resolve().parent.parent


def shared_unit(nodeid: str) -> str | None:
    """The unit of a machine-wide resource the test ``nodeid`` belongs to, by its id alone
    (what the scheduler has): a test under the unit's folder, or one run with its backend
    (``[ray]``, ``[...-ssh-...]``); None: none."""
    path, _, rest = nodeid.partition("::")
    params = (rest[rest.find("[") + 1 : -1] if rest.endswith("]") else "").split("-")
    for unit, (folder, backend, _fixtures) in UNITS.items():
        if path.startswith(folder) or (backend is not None and backend in params):
            return unit
    return None


def on_the_machine(nodeid: str) -> bool:
    """Whether the test ``nodeid`` uses the SSH test hosts or a Ray cluster."""
    return shared_unit(nodeid) in MACHINE_UNITS


def on_slurm(nodeid: str) -> bool:
    """Whether the test ``nodeid`` is one of the Slurm test cluster's (by its folder)."""
    return shared_unit(nodeid) == "slurm"


def unit_of(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: a shared resource's, or its own."""
    return shared_unit(nodeid) or nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The units' tests first, longest unit first (a worker starts with each: the longest
    chains of the run), then the slow tests, then the others, each in their order. A test
    that uses a unit's resource where its id does not say so would run beside another
    one: it is refused, with what to do."""
    for unit, (folder, backend, fixtures) in UNITS.items():
        astray = [
            i.nodeid
            for i in items
            if fixtures & set(getattr(i, "fixturenames", ())) and shared_unit(i.nodeid) != unit
        ]
        if astray:
            where = folder + (f" (or run with the {backend} backend)" if backend else "")
            raise pytest.UsageError(
                f"these tests use the {unit} tests' shared resource but are not under {where}, "
                f"where one worker runs them one at a time: {', '.join(astray)}; move them "
                "there (tests/scheduling.py)"
            )
    first = [item for unit in UNITS for item in items if shared_unit(item.nodeid) == unit]
    for item in first:
        if on_the_machine(item.nodeid):  # they start hosts and clusters: not in the quick loop
            item.add_marker(pytest.mark.slow)
    chosen = set(map(id, first))
    rest = [item for item in items if id(item) not in chosen]
    # then the slow tests, then the quick ones: the quick ones fill the workers up at the
    # end, instead of one long test running on alone (longest first)
    slow = [item for item in rest if item.get_closest_marker("slow") is not None]
    slow_ids = set(map(id, slow))
    items[:] = first + slow + [item for item in rest if id(item) not in slow_ids]


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # a hook of xdist's, where installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n N`` (``--dist load``): the ray, ssh and Slurm tests as a unit each, every
    other test a unit of its own."""
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
        self.worker_done: dict[str, float] = {}  # worker -> its last report, s into the run
        self.spans: dict[str, tuple[str, float, float]] = {}  # test -> (worker, start, stop)
        self.sampler = Sampler(machine_cpu)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.failures.write_text("")

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        gateway = getattr(getattr(report, "node", None), "gateway", None)  # (xdist's worker)
        worker = str(getattr(gateway, "id", "main"))
        self.worker_done[worker] = time.monotonic() - self.started
        start, stop = getattr(report, "start", 0.0), getattr(report, "stop", 0.0)
        _, first, _ = self.spans.get(report.nodeid, (worker, start, stop))
        self.spans[report.nodeid] = (worker, min(first, start), stop)
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
        self.sampler.stop()
        workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT") or str(
            getattr(terminalreporter.config.option, "numprocesses", None) or 1
        )
        slowest = sorted(self.seconds.items(), key=lambda kv: kv[1], reverse=True)[:SLOWEST]
        chains = {unit: 0.0 for unit in UNITS}
        for k, v in self.seconds.items():
            if shared_unit(k) is not None:
                chains[str(shared_unit(k))] += v
        chain_text = ", ".join(f"{unit} {v:.0f} s" for unit, v in chains.items())
        (busy0, all0), (busy1, all1) = self.machine_at_start, machine_cpu()
        busy = f"{100 * (busy1 - busy0) / (all1 - all0):.0f} %" if all1 > all0 else "unknown"
        lines = [
            "# Test durations",
            "",
            f"{len(self.seconds)} tests in {wall:.0f} s wall ({wall / 60:.1f} min) on "
            f"{workers} worker(s); {sum(self.seconds.values()):.0f} s of test time in all; "
            f"load average {os.getloadavg()[0]:.2f} at the end. The units of tests run one "
            f"after another, each on one worker: {chain_text}. "
            f"The machine's {os.cpu_count()} CPUs were busy {busy} of the run (all its "
            "processes, the tests' and anyone else's). Each worker's last test ended at "
            + ", ".join(f"{w} {t:.0f} s" for w, t in sorted(self.worker_done.items()))
            + " (a worker done long before the others: the run ends on a tail).",
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
            "",
            *idle_report(self.sampler.samples, self.spans),
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(lines) + "\n")
        every = {k: round(v, 3) for k, v in sorted(self.seconds.items())}
        self.path.with_suffix(".json").write_text(json.dumps(every, indent=0) + "\n")
        timeline = {"samples": self.sampler.samples, "spans": self.spans}
        self.path.with_name("timeline.json").write_text(json.dumps(timeline) + "\n")
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
