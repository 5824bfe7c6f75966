import sys

from ingest.pairs.cli import main

sys.exit(main())
