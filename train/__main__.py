"""``python -m train --config configs/ease.yaml [--set key=value ...] [--data PATH] ...``"""

from train.cli import main

raise SystemExit(main())
