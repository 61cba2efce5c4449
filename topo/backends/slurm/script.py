"""The ``sbatch`` script of a request: the ``#SBATCH`` lines a user of Slurm would
write by hand (the job's name, the warning signal to the batch shell, requeue on
preemption, output appended across requeues, then each component's partition, time,
nodes, CPUs, GPUs and memory; ``#SBATCH hetjob`` between the components of a
heterogeneous job), a comment per planned node saying what runs there, and topo's
launcher ``exec``'d so that it *is* the batch shell (``--signal=B:`` reaches only that
process). Pure: text in, text out.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Sequence

from topo.backends.slurm.request import Component, Request
from topo.ir import Program

WARNING_SIGNAL = "USR1"  # what Slurm sends --warning-s before the job's end


def job_name(program: Program) -> str:
    """The job's name in ``squeue``: ``topo-<program>`` (words Slurm keeps as they are)."""
    return "topo-" + re.sub(r"[^A-Za-z0-9_.-]", "_", program.name)


def _component_lines(request: Request, comp: Component) -> list[str]:
    """The ``#SBATCH`` options of one component (repeated per component: a heterogeneous
    job's components do not inherit the partition)."""
    opts = request.options
    lines = []
    if opts.partition is not None:
        lines.append(f"--partition={opts.partition}")
    if opts.time is not None:
        lines.append(f"--time={opts.time}")
    if opts.account is not None:
        lines.append(f"--account={opts.account}")
    if opts.qos is not None:
        lines.append(f"--qos={opts.qos}")
    features = [*([f"({opts.constraint})"] if opts.constraint else []), *comp.labels]
    if len(features) == 1 and opts.constraint:
        features = [opts.constraint]
    if features:
        lines.append(f"--constraint={'&'.join(features)}")
    lines += [f"--nodes={comp.nodes}", "--ntasks-per-node=1", f"--cpus-per-task={comp.cpus}"]
    if comp.gpus:
        lines.append(f"--gres=gpu:{comp.gpus}")
    if comp.memory_mib:
        lines.append(f"--mem={comp.memory_mib}M")
    return lines


def _shown(program: Program, exes: Sequence[str]) -> str:
    """A node's executables by group: ``learner, actor ×12``."""
    counts = Counter(program.node(n).group for e in exes for n in program.executable_index[e].nodes)
    return ", ".join(g if k == 1 else f"{g} ×{k}" for g, k in counts.items())


def _node_comments(program: Program, request: Request) -> list[str]:
    out = []
    for i, node in enumerate(request.nodes):
        where = f" (component {node.component})" if request.heterogeneous else ""
        count = f"{len(node.exes)} process{'es' if len(node.exes) != 1 else ''}"
        out.append(f"# node {i}{where}: {count}: {_shown(program, node.exes)}")
    return out


def _command(argv: Sequence[str]) -> str:
    """``argv`` as a shell command, each ``-p NAME=VALUE`` on a line of its own."""
    out = ""
    for i, word in enumerate(argv):
        if word == "-p" and i:
            out += " \\\n    -p"
        else:
            out += (" " if out else "") + shlex.quote(word)
    return out


def render(
    program: Program,
    request: Request,
    launcher: Sequence[str],
    *,
    output: str | None = None,
    workdir: str | None = None,
) -> str:
    """The script: ``launcher`` (argv of topo's launcher inside the job) ``exec``'d after
    the ``#SBATCH`` lines; ``output`` the job's output file (``--output``), ``workdir``
    where it starts (``cd``)."""
    opts = request.options
    nodes = len(request.nodes)
    exes = sum(len(n.exes) for n in request.nodes)
    source = f" ({program.source})" if program.source else ""
    lines = [
        "#!/bin/bash",
        f"# topo: the Slurm job of program '{program.name}'{source}: {exes} process"
        f"{'es' if exes != 1 else ''} on {nodes} node{'s' if nodes != 1 else ''}",
        *_node_comments(program, request),
        f"#SBATCH --job-name={job_name(program)}",
        f"#SBATCH --signal=B:{WARNING_SIGNAL}@{opts.warning_s}",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
    ]
    if output is not None:
        lines.append(f"#SBATCH --output={output}")
    lines += [f"#SBATCH {word}" for word in opts.extra()]
    for i, comp in enumerate(request.components):
        if i:
            lines.append("#SBATCH hetjob")
        lines += [f"#SBATCH {line}" for line in _component_lines(request, comp)]
    lines.append("")
    if workdir is not None:
        lines.append(f"cd {shlex.quote(workdir)} || exit 1")
    # a warning due while Python starts would end it (USR1's default): topo reads the
    # job's times once it listens, and acts on a warning it did not hear
    lines.append(f"trap '' {WARNING_SIGNAL}")
    lines.append("exec " + _command(launcher))
    return "\n".join(lines) + "\n"
