"""Language tools with no topology in them: YAML read with positions, pydantic errors
turned into positioned diagnostics, and the ``${...}`` expression engine. The loader,
the compiler and the ssh inventory all read YAML with them."""
