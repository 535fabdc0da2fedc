"""``python -m compensate`` is the ``compensate`` command."""

import sys

from compensate.cli import main

sys.exit(main())
