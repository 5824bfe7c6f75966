"""The shape of the code, measured: the import graph (``tests/test_imports.py``'s walker: cycles and imports up
the stage order, bench included), every function longer than a screen, lines repeated across files, and the
line counts of the product code, bench/ and tests/.

    python bench/structure.py [--limit 60] [--git-rev REV]

A function's length is its ``def`` line to its last line (decorators, docstring and blank lines included:
what a reader scrolls through), from ``ast``. ``--git-rev`` also counts the lines at that commit
(``git show``), for a before/after. The last line is one JSON object: ``import_cycles``, ``upward_imports``,
``functions_over_limit`` (product code / bench), the longest of each, ``lines`` and ``lines_before``.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.test_imports import STAGE_ORDER, cycles, imports, upward  # noqa: E402

PRODUCT = tuple(p for p in STAGE_ORDER if p != "bench")
AREAS = {"product": PRODUCT, "bench": ("bench",), "tests": ("tests",)}


def python_files(packages, root: Path = REPO) -> list[Path]:
    return sorted(p for package in packages for p in (root / package).rglob("*.py"))


def function_lengths(files: list[Path], root: Path = REPO) -> list[tuple[int, str]]:
    """``(lines, "file:line name")`` of every function and method, longest first."""
    found = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                found.append((node.end_lineno - first + 1, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return sorted(found, key=lambda f: (-f[0], f[1]))


def line_counts(root: Path = REPO) -> dict[str, int]:
    return {area: sum(len(p.read_text(encoding="utf-8").splitlines()) for p in python_files(packages, root))
            for area, packages in AREAS.items()}


def line_counts_at(rev: str) -> dict[str, int]:
    """The same counts at a commit, read with ``git`` (no checkout)."""
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    counts = {}
    for area, packages in AREAS.items():
        names = [n for n in listed if n.endswith(".py") and n.split("/", 1)[0] in packages]
        counts[area] = sum(len(subprocess.run(["git", "show", f"{rev}:{n}"], cwd=REPO, capture_output=True,
                                              text=True, check=True).stdout.splitlines()) for n in names)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=60, help="report functions longer than this many lines")
    ap.add_argument("--git-rev", default=None, help="also count lines at this commit")
    args = ap.parse_args(argv)

    found = imports()
    loops, up = cycles(found), upward(found)
    print(f"import graph: {len(found)} imports between modules of {', '.join(STAGE_ORDER)}; "
          f"cycles {len(loops)}, upward {len(up)}")
    for component in loops:
        print("  cycle: " + " <-> ".join(component))
    for i in up:
        print(f"  upward: {i.source} -> {i.target} ({i.where})")
    over = {}
    for area in ("product", "bench"):
        lengths = function_lengths(python_files(AREAS[area]))
        over[area] = [f for f in lengths if f[0] > args.limit]
        print(f"{area}: {len(lengths)} functions, {len(over[area])} over {args.limit} lines")
        for n, where in over[area]:
            print(f"  {n:4d}  {where}")
    lines = line_counts()
    print("lines: " + ", ".join(f"{area} {n:,}" for area, n in lines.items()))
    before = line_counts_at(args.git_rev) if args.git_rev else None
    if before:
        print(f"lines at {args.git_rev}: " + ", ".join(f"{area} {n:,}" for area, n in before.items()))
    print(json.dumps({
        "import_cycles": len(loops), "upward_imports": len(up),
        "functions_over_limit": {area: len(f) for area, f in over.items()}, "limit": args.limit,
        "longest": {area: (f[0][1], f[0][0]) if f else None for area, f in over.items()},
        "lines": lines, "lines_before": before, "rev_before": args.git_rev}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
