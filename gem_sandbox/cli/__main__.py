"""``python -m gem_sandbox.cli``, as the ``gem-sandbox`` script."""

import sys

from gem_sandbox.cli import main

sys.exit(main())
