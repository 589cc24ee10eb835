"""``python -m appnorth inspect DIR [--json]``: see :mod:`appnorth._inspector`."""

import sys

from ._inspector import main

sys.exit(main())
