"""How long the demo world takes to generate.

    python bench/demo_world.py [--seed 3] [--scale 1] [--repeat 3]

A script, not a test (a wall-clock bound in a test fails at random on shared
machines). Writes the world ``--repeat`` times into a temporary folder with
:func:`structcse.demo.generate_demo_world`; the fastest run counts. The budget
is 5 s at scale 1 (about 1-2 s on an idle 2-core machine). Last line: one JSON
object, e.g. ``{"generate_seconds": 1.4, "budget_seconds": 5.0, ...}``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402

BUDGET_SECONDS = 5.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    from structcse.demo import generate_demo_world

    import_seconds = time.perf_counter() - started
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeat):
            start = time.perf_counter()
            world = generate_demo_world(Path(tmp) / f"run{run}", seed=args.seed, scale=args.scale)
            times.append(time.perf_counter() - start)
            print(f"run {run}: {times[-1]:.2f} s ({world.num_pages} enwiki pages, "
                  f"{world.dewiki_num_pages} dewiki pages)", flush=True)
        size = sum(p.stat().st_size for p in (Path(tmp) / "run0").rglob("*") if p.is_file())
    best = min(times)
    emit({"generate_seconds": round(best, 3), "budget_seconds": BUDGET_SECONDS * args.scale,
          "within_budget": best < BUDGET_SECONDS * args.scale, "import_seconds": round(import_seconds, 3),
          "runs": [round(t, 3) for t in times], "seed": args.seed, "scale": args.scale,
          "num_pages": world.num_pages, "bytes": size})
    return 0


if __name__ == "__main__":
    sys.exit(main())
