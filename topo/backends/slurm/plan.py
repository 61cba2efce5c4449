"""``topo plan FILE -b slurm``: the ``sbatch`` script ``topo run FILE -b slurm`` would
submit, sized from the plan and checked against the partition (read with
``scontrol``) before anything is submitted.

The script's launcher is the command a user would put there by hand: ``topo run FILE
-b slurm`` with the program's parameters, started in this directory with this
interpreter.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from topo.backends.slurm.demand import tpu_refusals
from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import Cluster, read_cluster
from topo.backends.slurm.request import Request, plan_request
from topo.backends.slurm.script import render
from topo.diagnostics import TopoError
from topo.ir import Program


def request_for(program: Program, options: SlurmOptions, cluster: Cluster | None = None) -> Request:
    """The job for ``program`` under ``options`` on ``cluster`` (default: read with
    scontrol); a ``TopoError`` for what the partition cannot hold, or no Slurm."""
    options = options.checked()
    refused = tpu_refusals(program)
    if refused:
        raise TopoError(refused)
    cluster = cluster if cluster is not None else read_cluster()
    return plan_request(program, cluster.partition(options.partition), options)


def launcher(program: Program, options: SlurmOptions) -> list[str]:
    """``python -m topo run FILE -b slurm [--warning-s S] -p NAME=VALUE ...``: every
    parameter with the value it has in the plan (the file's defaults are not known here:
    backends see only the program); the job's own options are its ``#SBATCH`` lines."""
    argv = [sys.executable, "-m", "topo", "run", program.source or "FILE", "-b", "slurm"]
    argv += options.inside_flags()
    for name, value in program.params.items():
        text = value if isinstance(value, str) else json.dumps(value)
        argv += ["-p", f"{name}={text}"]
    return argv


def plan_text(program: Program, **options: Any) -> str:
    """What ``topo plan -b slurm`` prints: the sbatch script (``Backend.placement_text``)."""
    opts = SlurmOptions.of(**options)
    request = request_for(program, opts)
    script = render(program, request, launcher(program, opts), workdir=os.getcwd())
    return "sbatch script (topo run -b slurm submits it):\n" + script.rstrip("\n")
