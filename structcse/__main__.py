import sys

from structcse.cli import main

sys.exit(main())
