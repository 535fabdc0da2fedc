"""``python -m calibration`` is the ``calibrate`` command."""

import sys

from calibration import main

sys.exit(main())
