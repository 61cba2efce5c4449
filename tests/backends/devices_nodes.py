"""A node that says which platform its process may use: the environment topo set, JAX's
config (JAX imported at the top of this module, so a fork server that imports the
targets has it before the fork) and, where asked, the device JAX opens."""

from __future__ import annotations

import os
from typing import Any

import jax

KEYS = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "PJRT_DEVICE", "TPU_VISIBLE_CHIPS")


class Platform:
    def env(self) -> dict[str, Any]:
        return {k: os.environ.get(k) for k in KEYS} | {"config": jax.config.jax_platforms}

    def device(self) -> str:
        """The platform of JAX's first device (opens the backend)."""
        return str(jax.devices()[0].platform)

    def pid(self) -> int:
        return os.getpid()
