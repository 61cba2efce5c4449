"""The nodes of ``bench/accelerators_bench.py``: a learner that trains a small JAX
network on the platform its process may open, actors that use JAX on theirs, and a
coordinator that collects where each ran and stops the program. Imports JAX and numpy
only (what a machine with an accelerator has), no Reverb."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp

import topo


class Learner:
    """Trains a two-layer network (bf16, ``size`` wide) on random regression batches for
    ``seconds`` once compiled; its steps per second and the device it ran on."""

    def __init__(self, seconds: float = 10.0, size: int = 2048, batch: int = 1024) -> None:
        self.seconds, self.size, self.batch = seconds, size, batch
        self.result: dict[str, Any] | None = None

    def run(self) -> None:
        device = jax.devices()[0]
        k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
        params = {
            "w1": jax.random.normal(k1, (self.size, self.size), jnp.bfloat16) * 0.02,
            "w2": jax.random.normal(k2, (self.size, 1), jnp.bfloat16) * 0.02,
        }
        x = jax.random.normal(k3, (self.batch, self.size), jnp.bfloat16)
        y = jnp.sum(x[:, :8], axis=1, keepdims=True)

        def loss(p: dict[str, Any]) -> Any:
            h = jax.nn.relu(x @ p["w1"])
            return jnp.mean(((h @ p["w2"]) - y).astype(jnp.float32) ** 2)

        @jax.jit
        def step(p: dict[str, Any]) -> tuple[dict[str, Any], Any]:
            value, grads = jax.value_and_grad(loss)(p)
            return jax.tree_util.tree_map(lambda a, g: a - 0.001 * g, p, grads), value

        params, first = step(params)  # compiled here
        first.block_until_ready()
        steps, t0 = 0, time.perf_counter()
        value = first
        while time.perf_counter() - t0 < self.seconds and not topo.stop_event().is_set():
            params, value = step(params)
            steps += 1
        value.block_until_ready()
        took = time.perf_counter() - t0
        self.result = {
            "platform": device.platform,
            "device": str(device),
            "steps": steps,
            "steps_per_s": round(steps / took, 1),
            "loss_first": float(first),
            "loss_last": float(value),
            "env": os.environ.get("JAX_PLATFORMS"),
        }
        topo.wait_for_stop()

    def report(self) -> dict[str, Any] | None:
        return self.result


class Actor:
    """Uses JAX (small matrix products) on the platform its process may open."""

    def __init__(self) -> None:
        self.platform: str | None = None

    def run(self) -> None:
        self.platform = jax.devices()[0].platform
        a = jnp.ones((128, 128))
        while not topo.stop_event().wait(0.05):
            a = (a @ a) / 128.0

    def report(self) -> dict[str, Any] | None:
        if self.platform is None:
            return None
        return {"platform": self.platform, "env": os.environ.get("JAX_PLATFORMS")}


class Coordinator:
    """Waits for every report, prints them on one ``RESULT`` line, stops the program."""

    def __init__(self, learner: Any, actors: list[Any]) -> None:
        self.learner, self.actors = learner, actors

    def run(self) -> None:
        while not topo.stop_event().is_set():
            learned = self.learner.report()
            acted = [a.report() for a in self.actors]
            if learned is not None and all(a is not None for a in acted):
                print("RESULT " + json.dumps({"learner": learned, "actors": acted}), flush=True)
                topo.stop("every node reported")
                return
            time.sleep(0.5)
