"""``python -m calibration`` is the ``calibrate`` command."""

import sys

from calibration.cli import main

sys.exit(main())
