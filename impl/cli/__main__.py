"""``python -m impl.cli``: the same as the ``logproof`` console script."""

import sys

from impl.cli import main

sys.exit(main())
