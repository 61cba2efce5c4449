"""Nodes for the ray backend's tests: they tell where they run."""

from __future__ import annotations

import os


class Where:
    """A courier node that reports its process and the Ray actor it runs in."""

    def where(self) -> dict[str, object]:
        import ray

        context = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "actor": context.get_actor_name(),
            "cwd": os.getcwd(),
            "ip": ray.util.get_node_ip_address(),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "ray_gpus": [str(g) for g in ray.get_gpu_ids()],
        }

    def echo(self, value: object) -> object:
        return value


class Reporter(Where):
    """Prints where it runs (a JSON line in its log), then serves until the stop."""

    def run(self) -> None:
        import json

        import topo

        print("WHERE " + json.dumps(self.where()), flush=True)
        topo.wait_for_stop()


class Dies:
    """Ends its process at once (no exception, no clean exit): its Ray worker dies."""

    def run(self) -> None:
        print("about to die", flush=True)
        os._exit(3)
