"""Nodes for the slurm backend's tests: they tell which node and step of the job they
run in (the test cluster's nodes all are this machine)."""

from __future__ import annotations

import os
from typing import Any


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


class Reporter:
    """Asks each of its peers where it runs and prints one line per executable, its own
    too (``ID on NODE``), then returns (with ``stops_program``: the program ends)."""

    def __init__(self, peers: dict[str, Any]) -> None:
        self.peers = peers

    def run(self) -> None:
        for name, handles in self.peers.items():
            many = handles if isinstance(handles, list) else [handles]
            for i, handle in enumerate(many):
                label = name if not isinstance(handles, list) else f"{name}/{i}"
                print(f"{label} on {handle.where()['node']}", flush=True)
        print(f"report on {os.environ.get('SLURMD_NODENAME')}", flush=True)
