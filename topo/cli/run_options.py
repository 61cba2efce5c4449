"""The options of ``topo run``, and the small frozen groups the command gathers them in.

Each option is declared once here as an ``Annotated`` type (typer reads the ``Option``
in it), so that the command's signature is one line per option; the command then
gathers them: ``Origin`` (what runs: FILE or a run to run again, its ``-p`` values, the
snapshot it starts from), ``Settings`` (the run options ``topo.api.prepare`` takes) and
``Looks`` (how the run is shown in this terminal, ``Dashboard`` for ``--ui``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from topo.cli.complete import complete_backend

FileOption = Annotated[
    Path | None,
    typer.Argument(
        metavar="FILE",
        help="Topology YAML file (not with --from or --resume).",
        show_default=False,
    ),
]
BackendOption = Annotated[
    str,
    typer.Option(
        "--backend",
        "-b",
        help="procs (one process per executable), threads, ssh (with --hosts), ray, or an "
        "installed plugin backend; `topo run -b NAME --help` lists the backend's options.",
        autocompletion=complete_backend,
    ),
]
GraceOption = Annotated[
    float | None,
    typer.Option(
        "--grace",
        min=0.0,
        help="Seconds nodes get to stop before being killed "
        "(default: the file's stop.grace_s, else 5).",
    ),
]
LogDirOption = Annotated[Path, typer.Option("--log-dir", help="Parent of the run directory.")]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        metavar="PORT",
        help="Serve every node's metrics and topo's own for Prometheus at "
        "http://127.0.0.1:PORT/metrics (0: any free port; status.json names it), behind "
        "the bearer token in RUN_DIR/metrics.token.",
        show_default=False,
    ),
]
MetricsToOption = Annotated[
    str,
    typer.Option(
        "--metrics-to",
        metavar="FORMATS",
        help="The nodes' metrics also as csv and/or tensorboard files in the run "
        "directory (comma-separated: csv,tensorboard; `tensorboard --logdir "
        "RUN_DIR/metrics/tensorboard`). JSON lines are always written.",
    ),
]
RunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Exact run directory (default: <log-dir>/<name>-<timestamp>)."),
]
LogMaxOption = Annotated[
    float,
    typer.Option(
        "--log-max-mb",
        min=0.0,
        help="Cap of each node log file in MiB: a bigger one is rotated to "
        "<node>.log.1, .2 ... (0: no cap).",
    ),
]
LogKeepOption = Annotated[
    int, typer.Option("--log-keep", min=0, help="Rotated files kept per node log.")
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No logs or live table; only the outcome.")
]
LiveOption = Annotated[
    bool | None,
    typer.Option(
        "--live/--no-live",
        help="Live table (default: when stdout is a terminal) or prefixed log lines.",
    ),
]
DetachOption = Annotated[
    bool,
    typer.Option(
        "--detach",
        "-d",
        help="Return once every node is up and leave the run going on in the background "
        "(prints its id: then topo ps / status / logs / attach / stop).",
    ),
]
FromOption = Annotated[
    Path | None,
    typer.Option(
        "--from",
        metavar="RUN",
        help="Rerun the program of RUN (a run directory, id or id prefix): its "
        "topology.yaml with the parameters it ran with, its backend and run options; "
        "options given here override them.",
    ),
]
ResumeOption = Annotated[
    Path | None,
    typer.Option(
        "--resume",
        metavar="RUN",
        help="Bring RUN's program back from its newest snapshot (or --snapshot N): "
        "counters, learners, replays and random streams go on where they were. No FILE: "
        "the program is RUN's own.",
    ),
]
ForkOption = Annotated[
    Path | None,
    typer.Option(
        "--fork",
        metavar="RUN",
        help="Start a new run of FILE from RUN's newest snapshot (or --snapshot N); "
        "parameters may change where the saved states still fit (e.g. more actors).",
    ),
]
SnapshotOption = Annotated[
    int | None,
    typer.Option(
        "--snapshot",
        metavar="N",
        min=1,
        help="With --resume or --fork: snapshot N (see topo snapshot --list RUN).",
    ),
]
PlotOption = Annotated[
    bool,
    typer.Option(
        "--plot",
        help="At the stop, draw the nodes' metrics to RUN_DIR/metrics.png "
        "(as topo plot does; needs the plot extra).",
    ),
]
UiOption = Annotated[
    bool,
    typer.Option(
        "--ui",
        help="Serve the run's web dashboard while it runs and print its URL (a process "
        "of its own that ends with the run; topo ui RUN serves it for any run).",
    ),
]
UiPortOption = Annotated[
    int, typer.Option("--ui-port", min=0, max=65535, help="With --ui: its port (0: a free one).")
]
UiHostOption = Annotated[
    str,
    typer.Option(
        "--ui-host",
        help="With --ui: its address (default loopback; another needs --ui-allow-remote).",
    ),
]
UiRemoteOption = Annotated[
    bool,
    typer.Option(
        "--ui-allow-remote",
        help="With --ui: listen on a --ui-host other machines can reach.",
    ),
]


@dataclass(frozen=True)
class Origin:
    """What runs: FILE, or the program of a run (``--from``/``--resume``), with ``-p``
    values; and the snapshot it starts from (``--resume``/``--fork``, ``--snapshot``)."""

    file: Path | None
    params: tuple[str, ...]
    from_run: Path | None
    resume: Path | None
    fork: Path | None
    snapshot: int | None


@dataclass(frozen=True)
class Settings:
    """The run options, named as ``topo.api.prepare`` takes them."""

    grace_s: float | None
    log_dir: Path
    run_dir: Path | None
    log_max_mb: float | None
    log_keep: int
    metrics_to: tuple[str, ...] = ()
    metrics_port: int | None = None


@dataclass(frozen=True)
class Dashboard:
    """``--ui``: where the run's dashboard listens."""

    host: str
    port: int
    allow_remote: bool


@dataclass(frozen=True)
class Looks:
    """How the run is shown in this terminal."""

    quiet: bool
    live: bool | None  # None: a live table when stdout is a terminal
    plot: bool
    dashboard: Dashboard | None  # --ui
