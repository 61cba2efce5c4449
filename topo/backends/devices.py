"""Which accelerators a node's process may open, said in its environment before any
framework in it can open one.

A process asks for accelerators through its groups' ``resources.accelerators`` (or names
GPUs by id, ``resources.gpus``); one that asks for none is CPU-only: JAX is held to its
CPU backend (``JAX_PLATFORMS=cpu``), CUDA shows it no GPU (``CUDA_VISIBLE_DEVICES``
empty) and PyTorch/XLA's runtime uses the CPU (``PJRT_DEVICE=CPU``). Without this every
process that imports JAX opens the accelerator: on a GPU each one takes most of its
memory, on a TPU only the first one gets the chip and the others fail to start.
``resources.cpu_only: false`` turns the default off for a group. A process that asks
for accelerators gets its kind's platform first (``JAX_PLATFORMS=tpu,cpu``: a missing
TPU is an error in that node, not a learner quietly training on the CPU) and, where its
devices are named, only those visible.

JAX reads ``JAX_PLATFORMS`` when it is imported: in a process forked from a fork server
that imported JAX already, the setting is made in JAX's config too (``apply``), and a
backend the fork server started -- it should not, and topo's never does on its own --
is dropped so that the process starts its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from topo.ir import Accelerators, Resources


@dataclass(frozen=True)
class Assigned:
    """The devices an executable gets: their kind and indexes on its host."""

    kind: str
    ids: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.kind} {','.join(map(str, self.ids))}"


CPU_ONLY_ENV: Mapping[str, str] = {
    "JAX_PLATFORMS": "cpu",
    "CUDA_VISIBLE_DEVICES": "",
    "PJRT_DEVICE": "CPU",
}
JAX_PLATFORM = {"gpu": "cuda,cpu", "tpu": "tpu,cpu"}  # an accelerator's kind: JAX's names


_machine: dict[str, str | None] | None = None  # the settings a fork server held back


def hold_cpu_only() -> None:
    """In a fork server: no device is opened here, whatever a module it imports does
    (``CPU_ONLY_ENV``); the machine's own settings are kept for the processes it forks
    that may see the devices (``cpu_only: false``)."""
    global _machine
    if _machine is None:
        _machine = {k: os.environ.get(k) for k in CPU_ONLY_ENV}
    os.environ.update(CPU_ONLY_ENV)


def machine_env() -> dict[str, str | None]:
    """The device settings of the machine as they were before ``hold_cpu_only`` (None:
    unset); empty in a process that held nothing back."""
    return dict(_machine or {})


def asked(resources: Iterable[Resources]) -> Accelerators | None:
    """The accelerators a process running nodes of groups with these resources asks for
    (the first group's that asks)."""
    for res in resources:
        if res.cpu_only:
            continue
        if res.accelerators is not None:
            return res.accelerators
        if res.gpus:
            return Accelerators("gpu", len(res.gpus), tuple(res.gpus))
    return None


def platform_env(
    resources: Iterable[Resources], assigned: Assigned | tuple[int, ...] | None = None
) -> dict[str, str | None]:
    """The environment that says which accelerators the process may open (None: a
    variable unset; the machine's settings for a group that turned the default off).
    ``assigned``: the devices placement gave it (bare indexes: of the kind asked; else
    the ids the group named, else none named: every device of its kind on the host). A
    group that asks for ``auto`` and was given none runs on the CPU."""
    resources = list(resources)
    want = asked(resources)
    if isinstance(assigned, tuple):
        assigned = None if want is None else Assigned(want.kind, assigned)
    kind = assigned.kind if assigned is not None else None if want is None else want.kind
    if want is None or kind in (None, "auto"):
        if want is None and any(res.sees_devices for res in resources):
            return machine_env()  # cpu_only: false
        return dict(CPU_ONLY_ENV)
    env: dict[str, str | None] = {**machine_env(), "JAX_PLATFORMS": JAX_PLATFORM[kind]}
    ids = assigned.ids if assigned is not None else want.ids
    if kind == "gpu":
        if ids is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, ids))
    else:
        env["PJRT_DEVICE"] = "TPU"
        if ids is not None and len(ids) == 1:  # one chip of a host of several
            env["TPU_VISIBLE_CHIPS"] = str(ids[0])
            env["TPU_CHIPS_PER_PROCESS_BOUNDS"] = "1,1,1"
            env["TPU_PROCESS_BOUNDS"] = "1,1,1"
    return env


def apply(env: Mapping[str, str | None]) -> None:
    """Set ``env`` in this process (None: unset), and JAX's platforms where JAX is
    imported already."""
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    jax = sys.modules.get("jax")
    if jax is None or "JAX_PLATFORMS" not in env:
        return
    try:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():  # (the parent's, inherited by the fork)
            xla_bridge._clear_backends()
    except (ImportError, AttributeError):  # another JAX: its config alone then
        pass
    jax.config.update("jax_platforms", env["JAX_PLATFORMS"])
