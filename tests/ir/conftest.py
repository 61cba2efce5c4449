"""IR tests: values, the JSON codec, the printer, and opaque values run end to end."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # ir_nodes must import in the launcher and in the fork server
    sys.path.insert(0, str(HERE))
