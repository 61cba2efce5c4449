"""The slurm backend's command-line options (``topo run -b slurm``, ``topo plan -b
slurm``): what a user of ``sbatch`` would pass by hand, less what topo sizes from the
plan (nodes, CPUs, GPUs, memory). Pure: no Slurm command, nothing of a run imported.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from topo.backends.base import BackendOption
from topo.diagnostics import TopoError

DEFAULT_WARNING_S = 120  # the warning signal before the time limit or preemption ends the job

OPTIONS: tuple[BackendOption, ...] = (
    BackendOption("partition", "the partition to submit to (default: the cluster's default)"),
    BackendOption("time", "the job's time limit, in Slurm's format (MINUTES, HH:MM:SS, D-HH:MM)"),
    BackendOption("account", "the account the job is charged to"),
    BackendOption("qos", "the quality of service of the job"),
    BackendOption("constraint", "the node features the job needs (sbatch --constraint)"),
    BackendOption(
        "warning_s",
        f"seconds before the job's end that topo is warned (default {DEFAULT_WARNING_S})",
        int,
        metavar="SECONDS",
    ),
    BackendOption(
        "sbatch_args",
        "more sbatch options, as one shell-quoted string (e.g. '--mail-type=END')",
        metavar="ARGS",
    ),
)

# sbatch options topo writes itself: from the plan, or from an option of its own
OWN_FLAGS: dict[str, str] = {
    "--nodes": "topo sizes the job from the plan",
    "-N": "topo sizes the job from the plan",
    "--ntasks": "topo starts one task per node",
    "-n": "topo starts one task per node",
    "--ntasks-per-node": "topo starts one task per node",
    "--cpus-per-task": "topo asks for the CPUs of resources.cpus",
    "-c": "topo asks for the CPUs of resources.cpus",
    "--mem": "topo asks for the memory of resources.memory",
    "--mem-per-cpu": "topo asks for the memory of resources.memory",
    "--gres": "topo asks for the GPUs of resources.gpus",
    "--gpus": "topo asks for the GPUs of resources.gpus",
    "-G": "topo asks for the GPUs of resources.gpus",
    "--gpus-per-node": "topo asks for the GPUs of resources.gpus",
    "--signal": "topo asks for its warning signal: give --warning-s",
    "--requeue": "topo's job is requeued on preemption",
    "--no-requeue": "topo's job is requeued on preemption",
    "--open-mode": "topo appends to the job's output",
    "--partition": "give --partition",
    "-p": "give --partition",
    "--time": "give --time",
    "-t": "give --time",
    "--account": "give --account",
    "-A": "give --account",
    "--qos": "give --qos",
    "-q": "give --qos",
    "--constraint": "give --constraint",
    "-C": "give --constraint",
    "--output": "topo writes the job's output to its run directory",
    "-o": "topo writes the job's output to its run directory",
    "--error": "topo writes the job's output to its run directory",
    "-e": "topo writes the job's output to its run directory",
}


@dataclass(frozen=True)
class SlurmOptions:
    """The backend's options as given (None: not given, Slurm's default applies)."""

    partition: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    warning_s: int = DEFAULT_WARNING_S
    sbatch_args: str | None = None

    @classmethod
    def of(cls, **options: Any) -> SlurmOptions:
        """From the keywords of ``topo run/plan -b slurm`` (unknown ones refused)."""
        known = {o.name for o in OPTIONS}
        wrong = sorted(set(options) - known)
        if wrong:
            raise TopoError.one(f"the slurm backend does not take {', '.join(wrong)}")
        given = {k: v for k, v in options.items() if v is not None}
        return cls(**given)

    def extra(self) -> list[str]:
        """``--sbatch-args`` as sbatch words; a ``TopoError`` for unreadable quoting, for
        an option topo writes itself, or a word that is no option."""
        if not self.sbatch_args:
            return []
        try:
            words = shlex.split(self.sbatch_args)
        except ValueError as exc:
            raise TopoError.one(
                f"--sbatch-args {self.sbatch_args!r}: cannot read it ({exc})",
                hint="give the options as one shell-quoted string: --sbatch-args '--mail-type=END'",
            ) from None
        for word in words:
            flag = word.split("=", 1)[0]
            if not flag.startswith("-"):
                raise TopoError.one(
                    f"--sbatch-args: {word!r} is not an sbatch option (each word is one, "
                    "as --NAME=VALUE)",
                    hint="write an option and its value as one word: --mail-type=END",
                )
            short = flag[:2] if not flag.startswith("--") else flag
            named = flag if flag in OWN_FLAGS else short
            why = OWN_FLAGS.get(named)
            if why is not None:
                raise TopoError.one(f"--sbatch-args {word}: topo sets {named} itself ({why})")
        return words

    def inside_flags(self) -> list[str]:
        """What the launcher inside the job is given of these options: ``--warning-s``
        when not the default (the rest size the job, and are its ``#SBATCH`` lines)."""
        if self.warning_s == DEFAULT_WARNING_S:
            return []
        return ["--warning-s", str(self.warning_s)]

    def checked(self) -> SlurmOptions:
        """These options, refused where they make no sense (before Slurm is asked)."""
        if self.warning_s < 1:
            raise TopoError.one(
                f"--warning-s {self.warning_s}: the warning comes at least 1 s before the job's end"
            )
        self.extra()
        return self
