"""What a batch holds when a fixed-size run streams a page-ordered set: pairs of rows from one page and the
same sentence twice, per batch, for the run's feed before (Ray Data's local shuffle buffer alone) and now: a
streamed set (``feed: stream``, ``train.feeds.drawn_from_whole_set``: a seeded ``random_shuffle`` of the whole
set, then the local buffer) and a held one (``feed: memory``: ``train.global_order``'s permutation), beside a
global permutation drawn with numpy (what SimCSE's and EASE's random samplers give).

    python bench/batches.py [--rows 1000000] [--batch 64] [--buffer 10000]

The set is built as ingest writes ``sentences`` and EASE's ``entity_pairs``: pages of 5-40 sentences one
after another, and each sentence once per link it holds (1-4 rows, side by side). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402


def page_ordered_rows(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    pages, sentences, page, sentence = [], [], 0, 0
    while len(pages) < n:
        for _ in range(rng.integers(5, 41)):
            links = int(rng.integers(1, 5))
            pages += [page] * links
            sentences += [sentence] * links
            sentence += 1
        page += 1
    return {"page": np.array(pages[:n], dtype=np.int64), "sentence": np.array(sentences[:n], dtype=np.int64)}


def batch_figures(batches) -> dict:
    """Per batch: pairs of rows from one page, and rows whose sentence another row of the batch already has."""
    same_page, repeats, with_repeat, count = 0, 0, 0, 0
    for batch in batches:
        _, per_page = np.unique(batch["page"], return_counts=True)
        same_page += int((per_page * (per_page - 1) // 2).sum())
        extra = len(batch["sentence"]) - len(np.unique(batch["sentence"]))
        repeats += extra
        with_repeat += extra > 0
        count += 1
    return {"batches": count, "same_page_pairs_per_batch": round(same_page / count, 3),
            "repeated_sentences_per_batch": round(repeats / count, 4),
            "batches_with_a_repeated_sentence": round(with_repeat / count, 4)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--buffer", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)

    import ray

    import pyarrow as pa

    from train.feeds import drawn_from_whole_set

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = page_ordered_rows(args.rows)
    cfg = SimpleNamespace(seed=args.seed, shuffle_buffer=args.buffer)
    out = {"rows": args.rows, "batch": args.batch, "shuffle_buffer": args.buffer,
           "pages": int(rows["page"][-1]) + 1, "rows_per_sentence_mean": round(args.rows / len(np.unique(rows["sentence"])), 2)}

    def stream(ds):
        ds.context.execution_options.preserve_order = True  # as train.run sets it
        return ds.iter_batches(batch_size=args.batch, drop_last=True, batch_format="numpy",
                               local_shuffle_buffer_size=args.buffer, local_shuffle_seed=args.seed)

    for name, make in (("before_local_buffer_only", lambda ds: ds), ("now_whole_set_then_buffer", lambda ds: drawn_from_whole_set(ds, cfg))):
        t0 = time.perf_counter()
        table, size = pa.table(rows), -(-args.rows // 16)  # 16 blocks in page order, as a set's files are
        ds = make(ray.data.from_arrow([table.slice(i, size) for i in range(0, args.rows, size)]))
        out[name] = {**batch_figures(stream(ds)), "seconds": round(time.perf_counter() - t0, 1)}
        print(f"[batches] {name}: {out[name]}", file=sys.stderr, flush=True)
    from train.global_order import GlobalOrder

    memory = GlobalOrder(args.rows, args.batch, args.seed)  # feed: memory (train.feeds.GlobalFeed), epoch 0
    out["now_memory_feed"] = batch_figures({k: v[memory.batch(i)] for k, v in rows.items()}
                                           for i in range(memory.steps_per_epoch))
    print(f"[batches] now_memory_feed: {out['now_memory_feed']}", file=sys.stderr, flush=True)
    order = np.random.default_rng(args.seed).permutation(args.rows)
    steps = args.rows // args.batch
    out["global_permutation"] = batch_figures({k: v[order[i * args.batch:(i + 1) * args.batch]] for k, v in rows.items()}
                                              for i in range(steps))
    print(f"[batches] global_permutation: {out['global_permutation']}", file=sys.stderr, flush=True)
    ray.shutdown()
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
