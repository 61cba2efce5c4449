"""The ``mock`` backport that Launchpad's tests import, which is the standard library's
``unittest.mock`` (the package itself is not installed)."""

import sys
import unittest.mock

sys.modules[__name__] = unittest.mock
