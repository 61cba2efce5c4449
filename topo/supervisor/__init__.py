"""The supervision engine: one run of a program on any backend.

``Launcher`` starts a compiled program's executables through a ``Backend``, watches
them (status reports, exits, readiness deadlines), applies restart policies and drives
the stop; it keeps ``status.json`` and the metrics files of the run directory. It is
the only room that reads a backend's seams; backends know nothing of it.
"""
