"""A node that reads absl flags and logs with absl, as library code (Acme's lp_utils, its
terminal loggers) does inside Launchpad nodes."""

from __future__ import annotations

from typing import Any

from absl import flags, logging

if "lp_test_greeting" not in flags.FLAGS:
    flags.DEFINE_string("lp_test_greeting", "hi", "A flag of the code a node runs.")
    flags.DEFINE_bool("lp_test_loud", True, "A bool flag of the code a node runs.")


class FlagReader:
    """Reads its flags where it is built; ``flags()`` says what it read."""

    def __init__(self) -> None:
        values = flags.FLAGS
        self._read = {
            "lp_launch_type": values.lp_launch_type,
            "greeting": values.lp_test_greeting,
            "loud": values.lp_test_loud,
        }
        logging.info("flag reader built with greeting %s", self._read["greeting"])

    def flags(self) -> dict[str, Any]:
        return dict(self._read)
