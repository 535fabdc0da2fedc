"""``python -m compensate`` is the ``compensate`` command."""

import sys

from .cli import main

sys.exit(main())
