"""ctest's entry: the package's tests under pytest, or skipped (77) where pytest is missing."""

import os
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed in", sys.executable, ": the Python tests are skipped")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", os.path.dirname(os.path.abspath(__file__))] + sys.argv[1:]))
