"""The suite's end-to-end checks: whole commands run as a user runs them (subprocess CLIs to a pipe, the
examples, a method added in one file, ingest -> train -> eval through a bucket, ...), marked ``end_to_end`` in
``tests/``. The default ``python -m pytest`` leaves them out so that it stays under 10 minutes on 2 cores;
this runs them, and the default suite beside them with ``--all``.

    python bench/end_to_end.py [--all]

Last line: one JSON object (passed, failed, skipped, seconds of each run).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit  # noqa: E402


def run_pytest(marker: str) -> dict:
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = round(time.time() - started, 1)
    print(done.stdout[-6000:], flush=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {key: int(n) for n, key in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    return {"marker": marker, "returncode": done.returncode, "seconds": seconds, "passed": counts.get("passed", 0),
            "failed": counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0),
            "skipped": counts.get("skipped", 0)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="run the default suite too, after the end-to-end checks")
    args = parser.parse_args(argv)
    runs = [run_pytest("end_to_end")]
    if args.all:
        runs.append(run_pytest("not end_to_end"))
    emit({"runs": runs, "ok": all(r["returncode"] == 0 for r in runs)})
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
