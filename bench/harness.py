"""What the benches share: the repository on ``sys.path``, the integrity benches' bucket and their stderr lines,
``python -m`` commands run and timed the way a user runs them, and the setting most of them start from (the
demo world ingested, a tiny BERT, the world's STS folder).

A bench imports this module first; nothing here imports a bench, so no two benches import each other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BUCKET = "structcse-integrity"  # the integrity benches' bucket on their moto server


def say(message: str) -> None:
    print(f"[integrity] {message}", file=sys.stderr, flush=True)


def cli(args: list[str], env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def refusal(done: subprocess.CompletedProcess, seconds: float) -> dict:
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return {"exit": done.returncode, "lines": len(lines), "seconds": round(seconds, 1),
            "message": lines[-1][:300] if lines else ""}


def timed_cli(args: list[str], env: dict | None = None, timeout: int = 900) -> dict:
    t0 = time.perf_counter()
    done = cli(args, env, timeout)
    return refusal(done, time.perf_counter() - t0)


def prepare(out: Path) -> dict:
    """The demo world ingested locally, a tiny BERT, the world's STS dev folder."""
    from ingest.pipeline import IngestConfig, run_ingest
    from setformat.io import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.tiny_bert import build_tiny_bert

    world = generate_demo_world(out / "world", seed=0)
    sets = out / "sets"
    if not (sets / "manifest.json").is_file():
        run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)],
                                out=str(sets), shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    model = out / "models" / "base"
    if not (model / "config.json").is_file():
        build_tiny_bert(read_table(f"{sets}/sentences", ["sentence"])["sentence"].to_pylist(), model)
    return {"world": world, "sets": str(sets), "model": str(model), "sts": str(world.sts_dir)}


def train_args(setting: dict, storage: str, name: str, steps: int, *extra: str) -> list[str]:
    return ["train", "--config", "configs/simcse_unsup.yaml", "--data", setting["sets"], "--model", setting["model"],
            "--storage", storage, "--name", name, "--num-workers", "0", "--max-steps", str(steps),
            "--set", "pooling=mean", "--set", "batch_size=16", "--set", "max_len=32",
            "--set", "checkpoint_every_steps=2", "--set", "log_every_steps=0", "--set", "shuffle_buffer=0", *extra]
