"""Program snapshots: every stateful node's state taken at one consistent point,
written atomically under ``<run_dir>/snapshots/<n>/``, and read back to resume."""
