"""Nodes for the ray backend's tests: they tell where they run."""

from __future__ import annotations

import os


class Where:
    """A courier node that reports its process and, when it runs in a Ray actor of its own
    (it asks for GPUs), that actor; a node forked by its Ray node's agent is in no Ray
    worker (``actor`` None)."""

    def where(self) -> dict[str, object]:
        import ray

        in_worker = ray.is_initialized()
        context = ray.get_runtime_context() if in_worker else None
        return {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "actor": context.get_actor_name() if context is not None else None,
            "cwd": os.getcwd(),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "omp": os.environ.get("OMP_NUM_THREADS"),
            "ray_gpus": [str(g) for g in ray.get_gpu_ids()] if in_worker else [],
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
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
