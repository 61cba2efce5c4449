"""The launcher's connection to Ray: join a cluster (``address``) or start a local Ray
for the run (watched by ``local.Watchdog``), and leave this process as it found it.

``ray.init`` changes the process it runs in: it sets ``RAY_AUTH_MODE=token`` (a local
Ray), ``PYTHONBREAKPOINT`` and more in ``os.environ``, caches its authentication mode,
and a Ray call after ``ray.shutdown`` would start a new local Ray by itself. A launcher
that runs twice (tests, notebooks) or starts processes afterwards must not inherit any
of that, so ``disconnect`` restores the environment and Ray's configuration.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topo.backends.ray.local import Watchdog


def shipped_tree(root: str) -> dict[str, Any]:
    """The job-level ``runtime_env`` that sends the working tree ``root`` to every node
    (Ray refuses a per-actor ``working_dir``); what ``--ship`` leaves out on ssh, and
    ``.gitignore``d files, stay behind."""
    from topo.backends.shipping import SKIP_DIRS, SKIP_SUFFIXES

    excludes = [f"{name}/" for name in sorted(SKIP_DIRS)]
    excludes += [f"*{suffix}" for suffix in SKIP_SUFFIXES]
    return {"working_dir": root, "excludes": excludes}


def actor_runtime_env() -> dict[str, Any]:
    """The ``runtime_env`` of topo's actors (agents and executables): Ray starts its
    worker processes at niceness 15 (``RAY_worker_niceness``) so that its own daemons come
    first, and what a worker forks inherits it; topo's workers run the program itself,
    which at nice 15 starves beside any busy process on the host (calls unanswered for a
    minute and stops past their grace beside two busy loops). They run at the normal
    priority, as Ray's own job supervisor does."""
    return {"env_vars": {"RAY_worker_niceness": "0"}}


def _no_auto_init() -> None:
    """A Ray call after ``ray.shutdown`` (a late kill) must not start a new local Ray."""
    try:
        from ray._private import auto_init_hook

        auto_init_hook.enable_auto_connect = False  # (RAY_ENABLE_AUTO_CONNECT=0, read once)
    except (ImportError, AttributeError):
        pass


def _reload_ray_config() -> None:
    """Make Ray in this process read its settings again (the authentication mode is
    cached: a later ``ray.init`` would still use a local Ray's token). Ray's own tests
    do this between clusters; private API, so a Ray without it is left as it is."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):
        pass


def connect_hint(exc: BaseException) -> str:
    """What to do when joining a cluster failed."""
    if "auth" in str(exc).lower():
        return (
            "the cluster uses Ray's token authentication: set RAY_AUTH_MODE=token, with "
            "its token in ~/.ray/auth_token or RAY_AUTH_TOKEN"
        )
    return "start one with `ray start --head`, or pass --address auto|HOST:PORT"


class RaySession:
    """One backend's use of Ray in this process, from ``connect`` to ``disconnect``."""

    def __init__(self, address: str | None, ship: bool) -> None:
        self.address = address
        self.ship = ship
        self.started_ray = False  # this session called ray.init (so it calls ray.shutdown)
        self._environ: dict[str, str] | None = None  # os.environ before ray.init changed it
        self._watchdog: Watchdog | None = None  # of the local Ray this session started

    def connect(self) -> None:
        """Join the cluster, or start a local Ray, unless this process is in one already."""
        _no_auto_init()
        import ray

        if ray.is_initialized():
            return
        self._environ = dict(os.environ)
        if not (sys.stdout.isatty() and sys.stderr.isatty()):
            # Ray colours what it prints here (its "(raylet) ..." notes) even into a pipe.
            os.environ.setdefault("RAY_COLOR_PREFIX", "0")
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        if self.ship:
            quiet["runtime_env"] = shipped_tree(os.getcwd())
        if self.address is None:
            from topo.backends.ray.local import start

            self._watchdog = start(quiet, say=lambda text: print(f"topo: {text}", file=sys.stderr))
            self.started_ray = True
        else:
            ray.init(address=self.address, **quiet)
            self.started_ray = True

    def disconnect(self) -> None:
        """Shut Ray down if this session started using it; restore the process."""
        import ray

        if self.started_ray:
            self.started_ray = False
            # A local Ray's agents (children of its raylet) can outlive ray.shutdown by
            # seconds: the launcher returns only once the whole tree is gone.
            from topo.backends.ray.local import end_all, tree

            procs = tree(self._watchdog.pids) if self._watchdog is not None else []
            ray.shutdown()
            end_all(procs, grace_s=5)
        if self._environ is not None:
            for key in set(os.environ) - set(self._environ):
                del os.environ[key]
            os.environ.update(self._environ)
            self._environ = None
            _reload_ray_config()
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None

    def helper_pids(self) -> list[int]:
        """Ray's head processes and their watchdog, when this session started Ray."""
        if self._watchdog is None:
            return []
        return [*self._watchdog.pids, self._watchdog.pid]
