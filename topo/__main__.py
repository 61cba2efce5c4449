"""``python -m topo``: the ``topo`` command."""

from topo.cli import main

if __name__ == "__main__":
    main()
