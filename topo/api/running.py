"""``RunningProgram``: a started program, as ``topo.launch`` returns it: handles to its
nodes, wait, stop, kill, snapshots and live changes (``apply``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topo.api.loading import Loaded, load
from topo.ir import Program

if TYPE_CHECKING:
    from topo.rundir.snapshots import Snapshot
    from topo.runtime import Handle, ProgramContext
    from topo.supervisor.change_plan import LivePlan
    from topo.supervisor.launcher import Launcher
    from topo.supervisor.state import Failure, NodeStatus


class ApplyRefused(ValueError):
    """A change that cannot be applied to the running program (``reasons`` say why);
    nothing was changed."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class ApplyNeedsConfirmation(ApplyRefused):
    """A change that would stop the program or lose work (``reasons`` say how), refused
    because it was not confirmed (``confirm=True``); nothing was changed."""


class Change:
    """What ``RunningProgram.apply`` did: the ``plan``, the change's ``generation`` (None:
    a dry run, or nothing to do) and its ``record`` (``changes/<generation>.json``)."""

    def __init__(self, plan: LivePlan, generation: int | None, record: dict[str, Any] | None):
        self.plan = plan
        self.generation = generation
        self.record = record

    @property
    def result(self) -> str:
        """``applied``, ``failed``, ``interrupted``, ``applying`` (still, at the timeout),
        or ``planned`` (a dry run, or nothing to do)."""
        if self.record is None:
            return "planned" if self.generation is None else "applying"
        return str(self.record.get("result"))


class RunningProgram:
    """A started program: handles to its nodes, wait, stop, kill. A context manager."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self._client: ProgramContext | None = None

    @property
    def program(self) -> Program:
        """The compiled program being run."""
        return self.launcher.program

    @property
    def run_dir(self) -> Path:
        """This run's directory (logs, program.json, status.json)."""
        return self.launcher.state.run_dir

    @property
    def exit_code(self) -> int | None:
        """None while running; then 0 clean stop, 1 failure, 130 Ctrl-C/kill."""
        return self.launcher.state.exit_code if self.launcher.done else None

    @property
    def failure(self) -> Failure | None:
        """The node failure that ended the run, if any."""
        return self.launcher.state.failure

    def handle(self, node_id: str, timeout: float | None = None) -> Handle:
        """A client handle to ``node_id`` usable from this (non-node) thread."""
        if node_id not in self.program.node_index:
            raise KeyError(f"no node {node_id!r} in program {self.program.name!r}")
        from topo.runtime import Handle, connect_program

        if self._client is None:
            assert self.launcher.registry is not None
            self._client = connect_program(self.launcher.registry.info)
        return Handle(node_id, timeout, program=self._client)

    def snapshot(self) -> Snapshot:
        """Take a consistent snapshot of the running program now (see ``topo snapshot``)."""
        return self.launcher.snapshot("topo.launch's snapshot()")

    def apply(
        self,
        source: Program | str | Path,
        params: Mapping[str, Any] | Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        max_unavailable: int = 1,
        fresh: bool = False,
        timeout: float | None = 300.0,
        confirm: bool = False,
        reset_params: bool = False,
    ) -> Change:
        """Change the running program into ``source`` (a topology file compiled with
        ``params``, or a program), as ``topo apply`` does: new nodes start, changed ones
        restart ``max_unavailable`` at a time, removed ones stop, and every other node
        goes on; a node restarted with a new definition keeps its state (``save`` /
        ``restore``) unless ``fresh``. A file starts from the run's parameters
        (``params`` change them by name; ``reset_params``: from the file's defaults).
        Waits up to ``timeout`` for the change to end. Raises ``ApplyRefused`` when it
        cannot be applied live, ``ApplyNeedsConfirmation`` when it would stop the
        program or lose work and ``confirm`` is not given (nothing changed then)."""
        from topo.supervisor.change_plan import ChangeAsk
        from topo.supervisor.change_record import read_change

        if isinstance(source, Program):
            program, where = source, {}
        else:
            carried = [] if reset_params else self.launcher.params_given
            loaded = load(source, params, carried=carried)
            program = loaded.program
            self._check_arguments(loaded)
            where = {
                "file": str(Path(source).resolve()),
                "topology": loaded.yaml_text,
                "params_given": list(loaded.spec.given),
                "params": {k: v for k, v in loaded.spec.param_values.items()},
            }
        ask = ChangeAsk(dry_run, max_unavailable, where, keep_state=not fresh, confirmed=confirm)
        plan, generation = self.launcher.apply(program, ask)
        if plan.refused:
            raise ApplyRefused(list(plan.refused))
        if plan.confirm and generation is None and not dry_run:
            raise ApplyNeedsConfirmation(list(plan.confirm))
        record = None
        if generation is not None:
            import time

            end = None if timeout is None else time.monotonic() + timeout
            while True:
                record = read_change(self.run_dir, generation)
                if record is not None and record.get("result") != "applying":
                    break
                if end is not None and time.monotonic() > end:
                    break
                time.sleep(0.02)
        return Change(plan, generation, record)

    def _check_arguments(self, loaded: Loaded) -> None:
        """Every target of ``loaded`` imported where the nodes import them (procs: its fork
        server) and every node's arguments checked, as topo run does: a wrong argument is
        an error at its line (``TopoError``), before anything changes."""
        from topo.compile.checks import check_imports, checked_targets
        from topo.targets import TargetInfo

        program = loaded.program
        found = self.launcher.describe_targets(
            checked_targets(program, loaded.spec), program.source
        )
        described = {
            t: v if isinstance(v, str) else TargetInfo.from_json(v) for t, v in found.items()
        }
        imports_here = self.launcher.backend.imports_here
        check_imports(program, loaded.spec, imports_here=imports_here, described=described)

    def wait_ready(self, timeout: float | None = 60.0) -> bool:
        """Wait until every node is up (served / running)."""
        return self.launcher.wait_ready(timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the program to end; its exit code, or None on timeout."""
        code = self.launcher.wait(timeout)
        if self.launcher.done:
            self._close_client()
        return code

    def stop(
        self, reason: str = "stopped by the caller", timeout: float | None = None
    ) -> int | None:
        """Stop (stop event, grace period, kill) and wait up to ``timeout``."""
        if not self.launcher.done:
            self.launcher.request_stop(reason)
        return self.wait(timeout)

    def kill(self) -> None:
        """Kill every executable now."""
        self.launcher.supervisor.kill()

    def pids(self) -> set[int]:
        """Every process id this run started on this machine (executables and helpers), for
        orphan checks; processes on other hosts (ssh) are not listed."""
        return set(self.launcher.state.all_pids)

    def status(self) -> list[NodeStatus]:
        """Current status of every node."""
        return list(self.launcher.state.nodes.values())

    def log(self, node_id: str) -> str:
        """The log file content of ``node_id`` so far (the current file: what a size cap
        rotated away is in ``<node>.log.1`` and on)."""
        from topo.rundir.layout import log_path

        return log_path(self.run_dir, node_id).read_text(errors="replace")

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.address_book.close()
            self._client = None

    def __enter__(self) -> RunningProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
