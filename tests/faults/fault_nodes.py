"""Node code for the fault tests (imported by the launcher and by the fork server)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import topo


class Spawner:
    """Starts two ``sleep 600`` processes in its constructor -- one in its own process
    group, one detached with ``setsid`` -- and records their pids (a file and an RPC)."""

    def __init__(self, pid_file: str = "") -> None:
        self.procs = [
            subprocess.Popen(["sleep", "600"]),
            subprocess.Popen(["sleep", "600"], start_new_session=True),
        ]
        if pid_file:
            tmp = Path(pid_file + ".tmp")
            tmp.write_text(" ".join(str(p.pid) for p in self.procs))
            tmp.replace(pid_file)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]


class Stubborn:
    """run() ignores the stop event (the launcher has to kill it); with ``for_s`` it ends
    by itself that long after the stop (a thread cannot be killed: on the threads backend
    it must not outlive its test)."""

    def __init__(self, for_s: float | None = None, then_raise: bool = False) -> None:
        self.for_s = for_s
        self.then_raise = then_raise

    def run(self) -> None:
        stop = topo.stop_event()
        while True:
            if self.for_s is not None and stop.wait(0.1):
                time.sleep(self.for_s)  # past the grace, still not listening
                if self.then_raise:
                    raise RuntimeError("stubborn to the end")
                return
            time.sleep(0.1)


class StuckInit:
    """A constructor that never returns."""

    def __init__(self) -> None:
        while True:
            time.sleep(1)


class Caller:
    """Calls ``peer.ping()`` in its run, once, after saying so (a test waits for it)."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer

    def run(self) -> None:
        print("calling the peer", flush=True)
        self.peer.ping()


class Napper:
    """``nap(seconds)``: a call that takes long."""

    def nap(self, seconds: float) -> None:
        print("napping", flush=True)  # a test waits for this line
        time.sleep(seconds)


class LongCaller:
    """Calls ``peer.nap(600)`` once in its run (a blocking call, or a future's result
    with ``futures``) and says how that call ended, and when."""

    def __init__(self, peer: Any, futures: bool = False) -> None:
        self.peer = peer
        self.futures = futures

    def run(self) -> None:
        start = time.monotonic()
        try:
            if self.futures:
                self.peer.futures.nap(600).result()
            else:
                self.peer.nap(600)
            print("the call returned", flush=True)
        except Exception as exc:
            took = time.monotonic() - start
            print(f"the call failed after {took:.1f} s: {type(exc).__name__}: {exc}", flush=True)
        topo.stop_event().wait()


class Echo:
    """A served object without run(): answers until the program stops."""

    def ping(self) -> int:
        return os.getpid()


class Flood:
    """run() prints ``mb`` MB of numbered 100-byte lines as fast as it can (stopping early
    on a stop unless ``stubborn``: then it prints for ever), then ``FLOOD DONE <time>``."""

    def __init__(self, mb: float = 100.0, stubborn: bool = False) -> None:
        self.lines = int(mb * 1e6 / 100)
        self.stubborn = stubborn

    def run(self) -> None:
        import sys

        import topo

        stop = topo.stop_event()
        pad = "x" * 80
        i = 0
        while self.stubborn or i < self.lines:
            print(f"line {i:012d} {pad}")
            if i % 4096 == 0 and stop.is_set() and not self.stubborn:
                break
            i += 1
        sys.stdout.flush()
        print(f"FLOOD DONE {time.time():.3f}", flush=True)
        topo.wait_for_stop()


def _sleep_long() -> None:  # the target of WithChild's and Family's multiprocessing children
    time.sleep(600)


class WithChild:
    """Starts one child process in its constructor -- ``how``: a ``multiprocessing``
    context (``fork``, ``spawn``, ``forkserver``) or ``popen`` -- and appends
    ``NODE_PID CHILD_PID`` to ``pid_file``; ``run()`` raises (``crash``) or waits for
    the stop."""

    def __init__(self, how: str, pid_file: str, crash: bool = False) -> None:
        import multiprocessing

        self.crash = crash
        if how == "popen":
            self.child: object = subprocess.Popen(["sleep", "600"])
            pid = self.child.pid  # type: ignore[attr-defined]
        else:
            proc = multiprocessing.get_context(how).Process(target=_sleep_long, daemon=True)
            proc.start()
            self.child, pid = proc, proc.pid
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()} {pid}\n")

    def run(self) -> None:
        import topo

        if self.crash:
            raise RuntimeError("crashed beside its child")
        topo.wait_for_stop()


class Family:
    """Starts ``sleep 600`` (``Popen``, in its group and detached with ``setsid``) and a
    ``multiprocessing`` child (fork context), and records their pids in
    ``{pid_file}.{attempt}``; the first attempt then fails (``fail_first``) or the
    process ends (``exit_after_s``: ``os._exit(3)``, which on threads ends the launcher)."""

    def __init__(self, pid_file: str, fail_first: bool = False, exit_after_s: float = 0) -> None:
        import multiprocessing

        self.attempt = 0
        while Path(f"{pid_file}.{self.attempt}").exists():
            self.attempt += 1
        self.procs = [
            subprocess.Popen(["sleep", "600"]),
            subprocess.Popen(["sleep", "600"], start_new_session=True),
        ]
        self.child = multiprocessing.get_context("fork").Process(target=_sleep_long)
        self.child.start()
        tmp = Path(f"{pid_file}.tmp")
        tmp.write_text(" ".join(str(p) for p in self.pids()))
        tmp.replace(f"{pid_file}.{self.attempt}")
        self.fail = fail_first and self.attempt == 0
        self.exit_after_s = exit_after_s

    def pids(self) -> list[int]:
        return [*(p.pid for p in self.procs), int(self.child.pid or 0)]

    def run(self) -> None:
        import topo

        if self.exit_after_s:
            time.sleep(self.exit_after_s)
            os._exit(3)
        if self.fail:
            time.sleep(0.2)
            raise RuntimeError("first attempt fails")
        topo.wait_for_stop()


class Leaker:
    """Allocates (and touches) ``mib_per_s`` MiB a second until it is stopped or killed."""

    def __init__(self, mib_per_s: int = 120, pid_file: str = "") -> None:
        self.rate = mib_per_s
        self.hoard: list[bytearray] = []
        if pid_file:
            with open(pid_file, "a") as f:
                f.write(f"{os.getpid()}\n")

    def run(self) -> None:
        import topo

        while not topo.stop_event().is_set():
            self.hoard.append(bytearray(self.rate * 2**20 // 10))  # zero-filled: resident
            time.sleep(0.1)


class ForkChild:
    """Runs a short ``multiprocessing`` child (fork context) to its end in its constructor;
    answers ``ping`` afterwards."""

    def __init__(self) -> None:
        import multiprocessing

        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0.1,))
        child.start()
        child.join(30)
        self.code = child.exitcode

    def ping(self) -> int | None:
        return self.code


class ThreadSpawner:
    """Starts ``sleep 600`` from a thread of its own that ends a second later (its child
    passes to another thread of the process); answers ``pids`` once the thread is gone."""

    def __init__(self) -> None:
        import threading

        self.started: list[int] = []

        def start() -> None:
            self.started.append(subprocess.Popen(["sleep", "600"]).pid)
            time.sleep(1.0)  # seen by the backend's scans before the thread ends

        helper = threading.Thread(target=start)
        helper.start()
        helper.join(30)

    def pids(self) -> list[int]:
        return self.started
