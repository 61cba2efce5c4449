"""Program snapshots: whether one fits a program (``fit``: the same program for
``--resume``, the same nodes and targets for ``--fork``). A snapshot on disk, under
``<run_dir>/snapshots/<n>/``, is the run directory's (``topo.rundir.snapshots``)."""
