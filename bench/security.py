"""Secrets in the environment are never written down: ingest, a training run, an evaluation and a Tune search
on the demo world with every secret variable set (docs/security.md).

    python bench/security.py [--work DIR]

The end-to-end check that left the test suite (it was
``tests/test_security.py::test_secrets_in_the_environment_are_never_written``; the suite keeps the fast
checks of each piece: manifests redacted, configs and URLs holding a secret refused, Tune's credential
withholding). Every variable of ``infra.secrets.SECRET_ENV_VARS`` the test set is set to a marked value;
then, in one process with its own local Ray of 2 CPUs: ``ingest`` of the demo dumps, ``train.run`` (2 steps,
a dev metric), ``python -m eval --task sts --output``, and a one-trial FIFO search (``tune.search``).
Afterwards every file under the work folder and every file of the Ray session's logs is searched for
each value, and so is what the script printed meanwhile.

Last line: one JSON object: ``files_holding_a_secret`` and ``ray_logs_holding_a_secret`` (paths), ``printed``
(variables whose value reached stdout), ``aws_restored`` (the search put back what it withheld), ``ok``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402

from tests.test_security import SECRETS, files_holding  # noqa: E402  (the suite's secrets and their search)


def run_everything(work: Path) -> None:
    """ingest, a training run, an evaluation and a one-trial search, all writing under ``work``."""
    from eval.cli import main as eval_main
    from infra.logs import lines_muted
    from ingest.pipeline import IngestConfig, run_ingest
    from setformat.io import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD, generate_demo_world
    from train.config import TrainConfig
    from train.run import run
    from train.tiny_bert import build_tiny_bert
    from tune.search import TuneSettings, run_search

    world = generate_demo_world(work / "world", seed=0)
    with lines_muted("ingest"):
        run_ingest(IngestConfig(wikipedia=[str(world.wikipedia_dump)], wikidata=[str(world.wikidata_dump)],
                                out=str(work / "sets"), shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    sentences = read_table(work / "sets" / "sentences", ["sentence"])["sentence"].to_pylist()
    model = build_tiny_bert(sentences, work / "tiny_bert")
    base = {"method": "simcse_unsup", "model": str(model), "data": str(work / "sets"), "pooling": "mean",
            "batch_size": 16, "max_steps": 2, "checkpoint_every_steps": 2, "cpus_per_worker": 0.5,
            "log_every_steps": 0, "storage_path": str(work / "runs"), "dev_data": str(world.sts_dir)}
    outcome = run(TrainConfig.from_dict(base))
    code = eval_main(["--task", "sts", "--model", outcome.model_path, "--data", str(world.sts_dir),
                      "--split", "dev", "--output", str(work / "eval" / "sts.json")])
    if code != 0:
        raise RuntimeError(f"python -m eval --task sts exited {code}")
    settings = TuneSettings(search_space={"lr": {"choice": [3e-4]}}, searcher="grid", max_concurrent_trials=1,
                            scheduler="fifo", name="secret-search", storage_path=str(work / "runs"))
    with lines_muted("tune", "train"):
        run_search(TrainConfig.from_dict(base), settings)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", default=None, help="an empty folder (default: a new temporary one)")
    args = p.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="structcse-bench-security-"))
    os.environ.update(SECRETS)
    import ray

    ray.init(num_cpus=2, configure_logging=False)
    started = time.time()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_everything(work)
    sys.stdout.write(printed.getvalue())
    session_logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    result = {
        "files_holding_a_secret": files_holding(work, SECRETS.values()),
        "ray_logs_holding_a_secret": files_holding(session_logs, SECRETS.values()),
        "printed": [var for var, value in SECRETS.items() if value in printed.getvalue()],
        "aws_restored": os.environ.get("AWS_SECRET_ACCESS_KEY") == SECRETS["AWS_SECRET_ACCESS_KEY"],
        "wall_s": round(time.time() - started, 1),
    }
    result["ok"] = not (result["files_holding_a_secret"] or result["ray_logs_holding_a_secret"]
                        or result["printed"]) and result["aws_restored"]
    ray.shutdown()
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
