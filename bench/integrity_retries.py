"""The retry bound, as a user meets it: against an endpoint that accepts connections and never answers, the
commands a user runs with a bucket — ``python -m ingest --out``, ``python -m train --storage``, ``python -m eval
--model``, each with ``s3://`` and with ``gs://`` — fail in one line on stderr, within a minute, and the endpoint
sees each request exactly ``STRUCTCSE_STORAGE_ATTEMPTS`` times (3 here; s3fs's and gcsfs's own retry loops once
multiplied them). The read timeout is 10 s (``STRUCTCSE_STORAGE_READ_TIMEOUT``; the environment's, when set):
3 × 10 s + backoff (at most 3 s for s3, 5 s for gs) + the command's start (``python -m train`` imports torch
and Ray before its pre-flight: 10-15 s on 2 cores) stays under a minute; at the default 15 s the waiting alone
is up to 48 s (s3) or 50 s (gs), and train's start takes it past 60 s.

    python bench/integrity_retries.py [--out DIR]

The last line printed is one JSON object: per command its exit code, stderr lines, seconds, the message, and
``attempts``: how many times the endpoint saw each request (method and path), ``start_s``: seconds from the
command's start to its first request; ``ok`` when every command
failed with one line in at most 60 s and every request was seen exactly the attempts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit, prepare, say, shutdown_ray, timed_cli, train_args, work_folder  # noqa: E402
from bench.servers import silent_env  # noqa: E402

from tests.silent_endpoint import SilentEndpoint  # noqa: E402

ATTEMPTS = 3
BUCKET = "structcse-silent"
LIMIT_S = 60
READ_TIMEOUT_S = float(os.environ.get("STRUCTCSE_STORAGE_READ_TIMEOUT") or 10)


def commands(setting: dict, protocol: str) -> dict[str, list[str]]:
    root = f"{protocol}://{BUCKET}"
    return {
        "ingest": ["ingest", "--wikipedia", str(setting["world"].wikipedia_dump), "--out", f"{root}/sets"],
        "train": train_args(setting, f"{root}/runs", "silent", 2),
        "eval": ["eval", "--task", "sts", "--data", setting["sts"], "--split", "dev", "--model", f"{root}/m"],
    }


def retries_bounded(setting: dict, out: Path) -> dict:
    """Each command of :func:`commands`, for ``s3://`` and ``gs://``, against its own :class:`SilentEndpoint`."""
    results = {}
    for protocol in ("s3", "gs"):
        for name, args in commands(setting, protocol).items():
            silent = SilentEndpoint()
            env = silent_env(silent.endpoint, ATTEMPTS, str(out / "cache"), READ_TIMEOUT_S)
            started = time.monotonic()
            try:
                result = timed_cli(args, env=env, timeout=300)
            finally:
                silent.stop()
            result["attempts"] = dict(silent.seen)
            result["start_s"] = round(silent.first - started, 1) if silent.first else None
            result["ok"] = (result["exit"] not in (0, None) and result["lines"] == 1 and result["seconds"] <= LIMIT_S
                            and bool(silent.seen) and all(n == ATTEMPTS for n in silent.seen.values()))
            results[f"{name}_{protocol}"] = result
            say(f"retries_bounded {name} {protocol}: {json.dumps(result)}")
    return {"attempts_setting": ATTEMPTS, "read_timeout_s": READ_TIMEOUT_S,
            "ok": all(r["ok"] for r in results.values()), "commands": results}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="the setting's folders (default: a temporary one)")
    args = ap.parse_args(argv)
    out = work_folder(args.out, "structcse-retries-")
    setting = prepare(out)
    shutdown_ray()  # the setting's ingest started one
    result = retries_bounded(setting, out)
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
