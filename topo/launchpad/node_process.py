"""What a node process of a Launchpad program does before its nodes are built, as
Launchpad's process entry does under ``app.run``: absl flags are parsed (their defaults,
plus the label's ``PythonProcess(args=...)``), ``--lp_launch_type`` is the program's
launch type, and absl logging goes to stderr from INFO up. Library code that reads
``FLAGS.x`` or logs with ``logging.info`` in a node (Acme's ``lp_utils``, its terminal
loggers) then works and shows as it does under Launchpad.

``lp.launch`` sets :func:`node_env` on every group it starts as processes; the backend
calls :func:`setup` in each process (``TOPO_PROCESS_SETUP``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

LAUNCH_TYPE_ENV = "TOPO_LP_NODE_LAUNCH_TYPE"
ARGS_ENV = "TOPO_LP_NODE_ARGS"  # a JSON list of command-line arguments
SETUP_TARGET = "topo.launchpad.node_process:setup"


def command_line(args: Mapping[str, object] | Sequence[str] | None) -> list[str]:
    """``PythonProcess.args`` as command-line arguments: a mapping as Launchpad writes it
    (``--key=value``, a bool as ``--key`` / ``--nokey``), a sequence as it is."""
    if not args:
        return []
    if isinstance(args, Mapping):
        out = []
        for key, value in args.items():
            if isinstance(value, bool):
                out.append(f"--{key}" if value else f"--no{key}")
            else:
                out.append(f"--{key}={value}")
        return out
    if isinstance(args, str):
        raise TypeError(f"PythonProcess(args=...) takes a mapping or a list, not {args!r}")
    return [str(a) for a in args]


def node_env(launch_type: str, args: Sequence[str] = ()) -> dict[str, str]:
    """What :func:`setup` reads in a node process: the launch type, the label's args."""
    env = {LAUNCH_TYPE_ENV: launch_type}
    if args:
        env[ARGS_ENV] = json.dumps(list(args))
    return env


def setup() -> None:
    """Parse absl's flags (known ones only, as Launchpad's process entry does), set
    ``--lp_launch_type`` to the program's and log from INFO up, as ``app.run`` does."""
    try:
        from absl import flags
        from absl import logging as absl_logging
    except ImportError:  # pragma: no cover - absl comes with jax and tensorflow
        return
    from topo.launchpad.flags import LAUNCH_TYPES  # defines --lp_launch_type

    program = sys.argv[0] if sys.argv and sys.argv[0] else "node"
    args = json.loads(os.environ.get(ARGS_ENV, "[]"))
    values = flags.FLAGS
    values([program, *args], known_only=True)
    launch_type = os.environ.get(LAUNCH_TYPE_ENV, "")
    if launch_type in LAUNCH_TYPES:
        values["lp_launch_type"].value = launch_type
    absl_logging.use_absl_handler()
    # to this process's stderr as it is now (the node's log), not as absl first found it
    absl_logging.get_absl_handler().python_handler.stream = sys.stderr
    if values["verbosity"].using_default_value:
        absl_logging.set_verbosity(absl_logging.INFO)  # as app.run leaves it
