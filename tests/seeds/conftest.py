"""The seed tests' helper module gets pytest's assertion messages."""

import pytest

pytest.register_assert_rewrite("seed_support")
