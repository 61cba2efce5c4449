"""The run directory: every name in it and every file more than one room reads.

``layout`` names each file and directory and makes the paths (a node's log, an
executable's output, metrics, changes, agents' logs; the layout is drawn there),
``lines`` the lines of a log (timestamps, the launcher's markers), ``record`` the
``run.json`` of how a run was started, ``status`` the ``status.json`` the launcher keeps
current, ``snapshots`` the snapshots on disk. Everything here imports the standard
library only and nothing else of topo: the supervisor, the backends and their agents on
other hosts, the command line, the dashboard and ``topo.runs`` all read it.
"""
