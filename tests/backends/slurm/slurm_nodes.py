"""Nodes for the slurm backend's tests: they tell which node and step of the job they
run in (the test cluster's nodes all are this machine)."""

from __future__ import annotations

import os


class Where:
    """A courier node that reports its Slurm node, step and pid."""

    def where(self) -> dict[str, object]:
        return {
            "node": os.environ.get("SLURMD_NODENAME"),
            "job": os.environ.get("SLURM_JOB_ID"),
            "step": os.environ.get("SLURM_STEP_ID"),
            "pid": os.getpid(),
        }

    def echo(self, value: object) -> object:
        return value
