"""``python -m pflt`` == the ``pflt`` console script."""

import sys

from pflt.cli import main

sys.exit(main())
