"""``python -m structcse.demo --out DIR [--seed N] [--scale K]``: write the demo world."""

from __future__ import annotations

import argparse

from structcse.demo import generate_demo_world


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m structcse.demo",
                                     description="Write the fictional demo world in real dump formats.")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    parser.add_argument("--scale", type=int, default=1, help="multiplies the number of entities")
    args = parser.parse_args(argv)
    world = generate_demo_world(args.out, seed=args.seed, scale=args.scale)
    for name in ("wikipedia_dump", "wikipedia_index", "dewiki_dump", "dewiki_index", "wikidata_dump", "sts_dir",
                 "nli_dir"):
        print(f"{name}: {getattr(world, name)}")
    print(f"num_pages: {world.num_pages}")
    print(f"dewiki_num_pages: {world.dewiki_num_pages}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
