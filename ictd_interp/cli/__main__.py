"""``python -m ictd_interp.cli``: the ``ictd-interp`` command."""

import sys

from ictd_interp.cli import main

sys.exit(main())
