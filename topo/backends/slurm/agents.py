"""How the slurm backend reaches a node's agent: ``SrunAgents``, the ``Transport`` of the
remote core (``topo.backends.remote``) over ``srun`` steps.

An agent is the stream agent (``python -m topo.backends.remote.stream``) run as a step
of the job on its node: ``srun --jobid=JOB --nodelist=NODE -N1 -n1 --overlap`` (a step
that shares the job's CPUs and memory with the others; without ``--exact`` it may use
all of the job's CPUs on the node). srun carries its stdin (requests, JSON lines) and
stdout (reports) and is a process of the launcher here (``SrunLink``); its stderr (the
agent's, and srun's own words) goes to the node's agent log. The agent's files are in
the run directory (``nodes/<node>``, on the file system the job's nodes share),
removed at the end. The agent has the launcher's Python and import path: the nodes of a
job run the same environment.

How an agent ended is srun's exit status (the task's code, 128 + a signal's number);
when srun could not start the step, the agent "ended" with srun's error. An agent that
goes quiet for the lease has lost its node for the run.

Where the launcher is its job's batch shell (it has a ``guard.JobGuard``), the agents
are started with ``topo.runtime.sigterm.HOLD_ENV``: at a preemption with a grace time
Slurm sends SIGTERM to the steps only, and the agents and all topo forks there live
through it; the agent reports it (``signal``) and the guard decides.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from topo.backends.base import JobContext
from topo.backends.proctree import how_it_ended
from topo.backends.remote.records import Agent
from topo.backends.remote.silence import Silence
from topo.backends.remote.transport import AGENT_MODULE, StreamTransport, run_init
from topo.backends.slurm.allocation import Allocation
from topo.runtime.sigterm import HOLD_ENV

PING_S = 1.0  # the launcher renews each agent's lease this often
START_S = 90.0  # an agent has this long to say hello (a step on a busy node, an import)
EXIT_S = 10.0  # after its output ends, srun has this long to exit (and say how)
CLOSE_S = 10.0  # at the end, an agent has this long to end all it started
NODES_DIR = "nodes"  # the run directory's folder of the agents' own files


def srun_command(job: str, node: str, het_group: int | None = None) -> list[str]:
    """The ``srun`` that starts ``node``'s agent as a step of ``job`` (in its component
    ``het_group`` of a heterogeneous job: srun reaches only component 0 without it)."""
    return [
        "srun",
        f"--jobid={job}",
        *([f"--het-group={het_group}"] if het_group is not None else []),
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--overlap",
        f"--job-name=topo-agent-{node}",
        sys.executable,
        "-m",
        AGENT_MODULE,
    ]


def agent_env(base: Mapping[str, str], hold_sigterm: bool = False) -> dict[str, str]:
    """The environment of an agent's srun: the caller's, with the launcher's import path
    (and ``hold_sigterm``: the step's SIGTERM is a notice, ``topo.runtime.sigterm``)."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
    env.pop(HOLD_ENV, None)
    if hold_sigterm:
        env[HOLD_ENV] = "1"
    return env


def how_srun_ended(code: int | None) -> str:
    """srun's exit status in words: the agent's code, or the signal that ended it."""
    if code is not None and code > 128:
        try:
            return f"was killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return how_it_ended(code)


class SrunLink:
    """One agent's srun: requests out, reports in, its stderr into the agent log, the
    lease both ways (see the module's docstring)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        on_message: Callable[[dict[str, Any]], None],
        on_lost: Callable[[str], None],
        on_died: Callable[[str], None],
        log: Path,
        lease_s: float,
    ) -> None:
        self.proc = proc
        self.ended = False
        self._on_message, self._on_lost, self._on_died = on_message, on_lost, on_died
        self._log = log
        self._silence = Silence(lease_s, PING_S)
        self._said: deque[str] = deque(maxlen=3)  # srun's last error lines
        self._lock = threading.Lock()
        self._done = threading.Event()
        assert proc.stdout is not None and proc.stderr is not None
        for target, name in (
            (self._read, "out"),
            (self._copy_stderr, "err"),
            (self._watch, "lease"),
        ):
            threading.Thread(target=target, name=f"topo-srun-{name}", daemon=True).start()

    def send(self, **msg: Any) -> None:
        """One request (any thread); dropped once the agent's stdin is closed."""
        data = (json.dumps(msg) + "\n").encode()
        with self._lock:
            stdin = self.proc.stdin
            if stdin is None or stdin.closed:
                return
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError):
                pass  # srun is ending: the reader says how

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        for line in out:
            self._silence.heard()
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                self._on_message(msg)
        try:
            code: int | None = self.proc.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            code = None
        self._done.wait(EXIT_S)  # srun's last words are in the log
        how = how_srun_ended(code)
        if not self._silence.heard_once and self._said:
            how += f" before the agent started ({' / '.join(self._said)})"
        self._end(how, died=True)

    def _copy_stderr(self) -> None:
        err: IO[bytes] | None = self.proc.stderr
        assert err is not None
        try:
            with open(self._log, "ab") as log:
                for line in err:
                    log.write(line)
                    log.flush()
                    text = line.decode(errors="replace").strip()
                    if text.startswith("srun: error:"):
                        self._said.append(text.removeprefix("srun: error:").strip())
        finally:
            self._done.set()

    def _watch(self) -> None:
        """Ping the agent; a link that went quiet for the lease (or never spoke) is lost."""
        while not self.ended:
            self.send(t="ping")
            time.sleep(PING_S)
            silence = self._silence
            if silence.heard_once and silence.check() is not None:
                self._end(f"no heartbeat from its agent for {silence.lease_s:g}s")
            elif not silence.heard_once and time.monotonic() - silence.last_heard > START_S:
                self._end(f"its agent did not start within {START_S:g}s")

    def _end(self, reason: str, died: bool = False) -> None:
        with self._lock:
            if self.ended:
                return
            self.ended = True
        if not died:
            self._stop_srun()
        (self._on_died if died else self._on_lost)(reason)

    def _stop_srun(self) -> None:
        """End srun (and with it the step): SIGTERM, then SIGKILL."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                return
            try:
                self.proc.send_signal(sig)
                self.proc.wait(EXIT_S)
            except (OSError, subprocess.TimeoutExpired):
                continue

    def close(self) -> None:
        """EOF to the agent (it ends everything it started), then wait for srun."""
        with self._lock:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(CLOSE_S)
        except subprocess.TimeoutExpired:
            self._stop_srun()
        self.ended = True


class SrunAgents(StreamTransport):
    """The agents of one slurm run, one srun step each (see the module's docstring)."""

    def __init__(
        self,
        allocation: Allocation,
        lease_s: float,
        env: Mapping[str, str] | None = None,
        hold_sigterm: bool = False,
    ) -> None:
        self.allocation = allocation
        self.lease_s = lease_s
        self.env = agent_env(os.environ if env is None else env, hold_sigterm)
        self.links: list[SrunLink] = []

    def where(self, host: str) -> str:
        return f"Slurm node {host}"

    def node_dir(self, job: JobContext, node: str) -> Path:
        """The agent's own files on ``node`` (its fork server's log, its executables')."""
        return job.run_dir.resolve() / NODES_DIR / node

    def open_agent(self, agent: Agent, job: JobContext) -> Any:
        fleet = self.fleet
        node = self.allocation.node(agent.host)
        try:
            proc = subprocess.Popen(
                srun_command(
                    self.allocation.job,
                    node.name,
                    node.component if self.allocation.heterogeneous else None,
                ),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                start_new_session=True,  # the terminal's ^C is the launcher's to handle
            )
        except OSError as exc:
            raise RuntimeError(f"srun could not start: {exc}") from None
        link = SrunLink(
            proc,
            lambda msg: fleet.message(agent, msg),
            lambda why: fleet.agent_unreachable(agent, why),
            lambda how: fleet.agent_ended(agent, how),
            fleet.agent_log(agent.label),
            self.lease_s,
        )
        self.links.append(link)
        init = {**run_init(job, self.accelerator_ids), "lease_s": self.lease_s}
        init["step_devices"] = True  # GPUs given as positions in what the step sees
        run_dir = str(self.node_dir(job, node.name))
        link.send(t="init", host=node.name, address=node.address, run_dir=run_dir, **init)
        return link

    def shutdown(self, agents: list[Agent]) -> None:
        super().shutdown(agents)
        for link in self.links:  # agents that ended or were lost: their srun too
            if link.proc.poll() is None:
                link.close()

    def srun_pids(self) -> list[int]:
        """The srun processes (this machine's) that still run."""
        return [link.proc.pid for link in self.links if link.proc.poll() is None]

    def clear(self, job: JobContext) -> None:
        """Remove the agents' files (their logs are in the run directory by now)."""
        shutil.rmtree(job.run_dir.resolve() / NODES_DIR, ignore_errors=True)
