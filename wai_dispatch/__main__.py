"""``python -m wai_dispatch``: the ``wai-dispatch`` command."""

import sys

from wai_dispatch.cli.main import main

sys.exit(main())
