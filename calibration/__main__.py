"""``python -m calibration`` is the ``calibrate`` command."""

import sys

from .cli import main

sys.exit(main())
