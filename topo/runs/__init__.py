"""Runs as things to operate from any shell: the machine's index of runs, what a run
directory says about its run (alive, lost, ended), the control channel of a live run,
detached launches and the history of a run's logs.

Everything here imports only the standard library, so ``topo ps``, ``status``, ``logs``
and ``stop`` start fast.
"""
