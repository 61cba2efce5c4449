"""A node that floods its output (32 MiB printed at once: four times what the launcher
lets pile up unshown) with ``topo run`` piped: the launcher's memory and lag stay
bounded, it says what it skipped, relayed lines are whole, Ctrl-C ends within the grace
(a second one at once), log files are capped."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from fault_support import descendants, kill_pids, topo_run, wait_gone, wait_up

from topo.backends.base import Event
from topo.backends.tail import MAX_BEHIND
from topo.testing import wait_until

KEPT = re.compile(r"^learner \| line \d{12} x{80}$")
STAMPS = re.compile(r"\d{4}-\d\d-\d\dT\d")
SKIPPED = re.compile(
    r"^learner \| \[learner: [\d.]+ (MB|kB|bytes) of output skipped; "
    r"the whole output is in logs/learner.log\]$"
)
FLOOD_MB = 4 * MAX_BEHIND / 1e6  # what the node prints
PACE = 20_000  # lines a second a test's terminal shows at most (the node prints ~70,000)
GROWTH_MIB = 24  # at most this growth of the launcher: less than the flood
# ... of a process that also ran its first program (imports, threads); a backlog held as
# events would be 100+ MiB (340,000 events of a 100-byte line each)
API_GROWTH_MIB = 64


class Output:
    """Reads ``topo run``'s piped output as it comes, as a slow terminal would (at most
    ``PACE`` lines a second: slower than the node prints, so the launcher must skip);
    keeps what is not an ordinary flood line, and when ``FLOOD DONE`` arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.kept = 0
        self.other: list[str] = []
        self.torn: list[str] = []
        self.cut: list[str] = []
        self.done_lag: float | None = None
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            if KEPT.match(line):
                self.kept += 1
                if self.kept % 500 == 0:
                    time.sleep(500 / PACE)
                continue
            self.other.append(line)
            if line.startswith("learner | FLOOD DONE "):
                self.done_lag = time.time() - float(line.split()[-1])
            elif line.startswith("learner | ") and not SKIPPED.match(line):
                if "── topo:" in line or len(STAMPS.findall(line)) > 1:
                    self.torn.append(line)  # two writers' text on one line
                else:
                    self.cut.append(line)  # a line its process was killed in the middle of

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _flood(topology: Callable[..., Path], **args: object) -> Path:
    return topology(f"""
        name: flood
        nodes:
          learner: {{target: "fault_nodes:Flood", args: {args}}}
    """)


def _printed_all(runs: Path) -> bool:
    """Whether the node's log file ends with its ``FLOOD DONE`` line."""
    for log in runs.glob("*-*/logs/learner.log"):
        with open(log, "rb") as f:
            f.seek(max(f.seek(0, 2) - 4096, 0))
            if b"FLOOD DONE" in f.read():
                return True
    return False


def _said(out: Output, match: Callable[[str], object]) -> bool:
    """Whether a line of ``topo run`` other than a flood line matches."""
    return any(match(line) for line in list(out.other))


def _watch_rss(pid: int, stop: threading.Event, peak: list[int]) -> None:
    proc = psutil.Process(pid)
    while not stop.wait(0.1):
        try:
            peak[0] = max(peak[0], proc.memory_info().rss)
        except psutil.NoSuchProcess:
            return


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_flood_of_output_keeps_the_launcher_bounded(
    topology: Callable[..., Path], tmp_path: Path, backend: str
) -> None:
    path = _flood(topology, mb=FLOOD_MB)
    runs = tmp_path / "runs"
    grace = 5.0
    args = (str(path), "-b", backend, "--no-live", "--grace", str(grace), "--log-dir", str(runs))
    with topo_run(*args) as proc:
        wait_up(proc)
        below = descendants(proc.pid)
        base = psutil.Process(proc.pid).memory_info().rss
        peak, stop = [base], threading.Event()
        watcher = threading.Thread(target=_watch_rss, args=(proc.pid, stop, peak), daemon=True)
        watcher.start()
        out = Output(proc)
        try:
            # Ctrl-C as soon as the node printed its last line, whatever is still unshown.
            wait_until(  # 32 MiB on a busy machine
                lambda: _printed_all(runs), 240, what="FLOOD DONE in the node's log"
            )
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            proc.wait(grace + 10)
            took = time.monotonic() - t0
        finally:
            stop.set()
            kill_pids(below)
        out.join(10)
        assert proc.returncode == 130, out.other[-20:]
        assert took < grace + 3, f"Ctrl-C took {took:.1f}s"
        assert out.done_lag is not None, out.other[-20:]  # the last line is shown, soon
        assert out.done_lag < grace + 3, f"the output was relayed {out.done_lag:.1f}s late"
        grew = (peak[0] - base) / 2**20
        print(f"the launcher grew by {grew:.1f} MiB")
        assert grew < GROWTH_MIB, f"the launcher grew by {grew:.0f} MiB"
        assert any(SKIPPED.match(line) for line in out.other), out.other[:20]
        assert out.kept > 100 and not out.torn and not out.cut, (out.torn + out.cut)[:5]
        assert not wait_gone(below, 10)


@pytest.mark.slow
def test_a_second_ctrl_c_ends_a_flooding_run_at_once(
    topology: Callable[..., Path], tmp_path: Path
) -> None:
    path = _flood(topology, stubborn=True)
    runs = tmp_path / "runs"
    with topo_run(str(path), "--no-live", "--grace", "120", "--log-dir", str(runs)) as proc:
        wait_up(proc)
        below = descendants(proc.pid)
        out = Output(proc)
        try:
            # a backlog builds up: the launcher skips output it cannot show in time
            wait_until(lambda: _said(out, SKIPPED.match), 120, what="output skipped")
            proc.send_signal(signal.SIGINT)
            wait_until(
                lambda: _said(out, lambda line: "Ctrl-C again" in line),
                30,
                what="the first Ctrl-C taken (its kill hint shown)",
            )
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
            took = time.monotonic() - t0
        finally:
            kill_pids(below)
        out.join(10)
        assert proc.returncode == 130, out.other[-20:]
        assert took < 5, f"the second Ctrl-C took {took:.1f}s"
        assert not out.torn, out.torn[:5]
        # the node is SIGKILLed: its last line may be cut short, on a line of its own
        assert len(out.cut) <= 1, out.cut[:5]
        assert not wait_gone(below, 10)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_node_logs_are_capped_and_rotated(
    topology: Callable[..., Path], tmp_path: Path, backend: str
) -> None:
    path = _flood(topology, mb=6)
    runs = tmp_path / "runs"
    args = ("-b", backend, "--no-live", "--log-dir", str(runs), "--log-max-mb", "1")
    with topo_run(str(path), *args, "--log-keep", "2") as proc:
        wait_up(proc)
        below = descendants(proc.pid)
        out = Output(proc)
        try:
            wait_until(
                lambda: out.done_lag is not None or proc.poll() is not None,
                120,
                what="FLOOD DONE shown",
            )
            assert out.done_lag is not None, out.other[-20:]
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
        finally:
            kill_pids(below)
        out.join(10)
    assert proc.returncode == 130, out.other[-20:]
    (logs,) = runs.glob("*-*/logs")
    names = sorted(p.name for p in logs.iterdir())
    assert names == ["learner.log", "learner.log.1", "learner.log.2"], names
    cap = 1 << 20
    sizes = {p.name: p.stat().st_size for p in logs.iterdir()}
    assert all(size <= cap * 1.1 for size in sizes.values()), sizes
    assert sizes["learner.log.2"] > cap * 0.9, sizes
    numbers = [
        int(m.group(1))
        for name in ("learner.log.2", "learner.log.1", "learner.log")
        for m in re.finditer(r" line (\d{12}) ", (logs / name).read_text())
    ]
    assert numbers[-1] == 59999 and numbers == list(range(numbers[0], 60000))
    assert "FLOOD DONE" in (logs / "learner.log").read_text()


@pytest.mark.slow
def test_stop_of_the_api_ends_within_the_grace_with_a_slow_listener(
    topology: Callable[..., Path], tmp_path: Path, topo_launch: Callable[..., Any]
) -> None:
    """``topo.launch`` with a listener as slow as a terminal: stop() ends within the
    grace whatever output is pending, and this process does not hold the backlog."""
    path = _flood(topology, mb=FLOOD_MB)
    shown: list[str] = []

    def slow_terminal(event: Event) -> None:
        if event.kind == "log":
            time.sleep(0.0001)
            if not KEPT.match(f"learner | {event.message}"):
                shown.append(event.message)

    me = psutil.Process()
    base = me.memory_info().rss
    peak, watching = [base], threading.Event()
    threading.Thread(target=_watch_rss, args=(me.pid, watching, peak), daemon=True).start()
    try:
        run = topo_launch(path, "procs", grace_s=5.0, listeners=[slow_terminal], ready_timeout=60)
        wait_until(lambda: _printed_all(tmp_path / "runs"), 240, what="FLOOD DONE in the log")
        t0 = time.monotonic()
        assert run.stop(timeout=30) == 0
        took = time.monotonic() - t0
    finally:
        watching.set()
    assert took < 5.0 + 3, f"stop() took {took:.1f}s"
    grew = (peak[0] - base) / 2**20
    print(f"this process grew by {grew:.1f} MiB")
    assert grew < API_GROWTH_MIB, f"grew by {grew:.0f} MiB"
    assert any(line.startswith("[learner: ") for line in shown), shown[:5]
    assert [line for line in shown if not line.startswith("[learner: ")][-1].startswith(
        "FLOOD DONE"
    )
