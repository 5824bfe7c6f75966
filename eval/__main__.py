"""Entry point: ``python -m eval --help``."""

from eval.cli import main

raise SystemExit(main())
