"""``python -m topo``: the ``topo`` command."""

from topo.command import main

if __name__ == "__main__":
    main()
