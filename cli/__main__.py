import sys

from wai_dispatch.cli.main import main

sys.exit(main())
