"""The GPU training step: this project's beside stock transformers and sentence-transformers, all in
one run on one device.

    python bench/gpu.py [--parts a b c d] [--smoke] [--snli-dir DIR] [--profile FILE] [--save FILE]
    python bench/gpu.py --merge A.json C.json     # one result (and its checks) of runs that split the parts

No Ray, and ``datasets`` only inside the sentence-transformers parts. sentence-transformers imports
``datasets`` itself: (b)'s ``st_trainer`` and (c)'s ``st_cached`` need the ``datasets``, ``dill`` and
``multiprocess`` wheels (and any other ``datasets`` dependency the machine lacks; the Trainer also
needs ``accelerate``), else they report ``{"skipped": "no datasets package"}``. On a GPU machine
with torch, transformers, sentence-transformers and pyarrow, carrying those wheels in ``.whl/``::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && PYTHONPATH=/tmp/site python3 bench/gpu.py

On one H100 (bench/results/gpu-h100.txt): ``--parts a b d`` about 4 minutes, ``--parts c`` about 5.
Without a GPU, every code path runs on CPU with a 2-layer BERT at tiny sizes (a check that it runs;
figures meaningless, ``checks`` None; the compiled stock steps are skipped unless ``--compile-on-cpu``).
``--smoke`` on a GPU runs those tiny sizes there.

The project's step is measured in variants (``PROJECT_VARIANTS``): ``project``, the loop's recommended
GPU settings (``mixed_precision: bf16_weights``, train.precision: the encoder's weights cast to bf16
once per step from fp32 masters, no autocast inside the encoder); ``project_before``, the step as it
stood before them (autocast over fp32 weights); ``project_bf16_compiled``, the bf16 weights with
``compile_layers`` (the unpadded path's per-token layers through ``torch.compile``).

* (a) ``mfu``: tokens/s, TFLOP/s, MFU of a BERT-base training step (``BertConfig()``, random weights,
  bf16, fused AdamW) at rows x seq 256x32, 2048x32, 512x128 (full-length rows) for the project's
  variants (Encoder(cls) + SimCSE-unsup through ``train.step.forward_backward``, as bench/train.py's
  ``gpu_mfu``: rows/2 sentences, each twice), ``stock_eager`` (transformers' BertModel, sdpa, CLS,
  in-batch InfoNCE cosine/0.05 on the same [x; x] rows) and ``stock_compiled`` (``torch.compile`` of
  it). FLOPs = tokens x (6N + 12·L·d·seq), N non-embedding parameters (``gpu_mfu``'s formula);
  ``compile_s``: first step minus a measured one.
* (b) ``snli_mnrl``: MNRL (SNLI (premise, entailment) pairs, in-batch negatives, cosine/0.05 = scale
  20, mean pooling, max_len 32, bf16) at 512 pairs a step: pairs/s and peak memory of the project's
  variants (the Ray loop's trainee built in process: ``simcse_sup`` without hard negatives), ``plain``
  (bench/train.py's ``plain_loop`` under autocast) and ``st_trainer`` (``SentenceTransformerTrainer``,
  ``MultipleNegativesRankingLoss(scale=20)``, ``bf16=True``). Tokenization, clipping (1.0, as the loop
  and the Trainer do) and the fused AdamW step count in all. Each variant's losses over the same
  batches and dropout seeds, and their largest relative difference from ``project_before``'s (the
  fp32-master autocast reference). Data: SNLI dev + test entailment pairs (``--snli-dir``, SentEval
  layout), else synthetic sentences. Encoder: BERT-base random weights with a WordPiece vocabulary of
  the texts (``train.tiny_bert``), a plain Hugging Face folder.
* (c) ``largest_batch``: first ``loss_tiles``, the loss alone at 65,536 pairs per ``loss_tile`` (1,024
  .. 16,384): s and peak memory, and the fastest, which the GradCache sizes then use. Then peak memory
  and s/step of the project's GradCache step (MNRL as in (b), ``chunk_size`` 1024) at 8,192 / 65,536
  / 1,048,576 pairs on pre-built token tensors (premise 10-24 tokens, entailment 6-13: (b)'s SNLI
  pairs average 17 and 9.6; tokenization not timed), the uncached step at 1,024 pairs
  (``gradcache_vs_uncached_per_pair`` at 65,536), and sentence-transformers'
  ``CachedMultipleNegativesRankingLoss(mini_batch_size=1024)`` at 65,536 pairs (loss + backward + clip +
  optimizer step called directly, the backward under autocast too, so its replayed forwards run in
  bf16). Out of memory: ``{"oom": true}``.
* (d) ``device_checks`` (``bench/gpu_checks.py``): the CPU exactness tests' claims on the device: tiled
  = dense loss for every method (float64, and bf16 autocast with its tolerance), GradCache = the big
  batch and compiled = eager in float64, and each bf16 way of running the step held to autocast's
  gradient error against float64.

``--profile FILE``: one step of ``project`` and ``project_before`` at 512x128 and on SNLI under
torch.profiler (wall, host and device time, kernel launches, host syncs, top ops). ``--save FILE``:
the result so far after every part (a run stopped by a time limit keeps what it measured).

On a machine without a GPU (or with ``--cpu-loss``) ``tiled_loss`` (``bench/tiled_loss.py``) follows:
every method's tiled loss against the dense oracle (``tiled_equals_dense``), the peak memory of one
loss forward + backward at 65,536 x 65,536 pairs, d = 384 (``loss_peak_gb_65536x384``, beside the
dense loss's computed size), tiled vs dense loss time at 4,096 and 8,192; ``--smoke`` shrinks it.

Progress goes to stderr, one line per measurement; the last line on stdout is one JSON object (exit 1
if a tiled loss differs from the dense one).
"""

from __future__ import annotations

import argparse
import atexit
import functools
import gc
import importlib
import itertools
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import REPO  # noqa: E402
# bench/ holds ingest.py (the ingest benchmark): off the path, or it would shadow the ingest package

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.gpu_checks import device_checks, profile_step  # noqa: E402

TEMPERATURE = 0.05
LR = 2e-5
MAX_LEN = 32
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}

GPU_SIZES = SimpleNamespace(
    mfu_shapes=((256, 32), (2048, 32), (512, 128)), mfu_warmup=3, mfu_steps=10,
    pairs=512, snli_warmup=3, snli_steps=10, st_workers=4,
    largest=(8192, 65536, 1048576), chunk=1024, loss_tile=None,  # None: the config's default
    uncached=1024, compare=65536,
    st_cached=(65536,), st_mini=1024, warmup_budget_s=30.0,
)
SMOKE_SIZES = SimpleNamespace(
    mfu_shapes=((16, 16), (64, 16), (16, 32)), mfu_warmup=1, mfu_steps=2,
    pairs=32, snli_warmup=1, snli_steps=2, st_workers=0,
    largest=(64, 256), chunk=16, loss_tile=32, uncached=16, compare=256,
    st_cached=(64,), st_mini=16, warmup_budget_s=30.0,
)
# the project's step as measured: ``project`` is the configuration a user gets on a GPU without flags
# (``mixed_precision: auto``: train.precision's bf16 weights, eager; the next batch collated in a thread, as the
# loop does on CUDA); ``project_before``: autocast over fp32 weights; the others take one change at a time
PROJECT_VARIANTS = {
    "project": {"mixed_precision": "auto"},
    "project_before": {"mixed_precision": "bf16"},
    "project_bf16_compiled": {"mixed_precision": "auto", "compile_layers": True},
}
PROFILED = ("project",)  # with --profile: one step each, at (a)'s largest shape and in (b)
PROFILE_FILE: Path | None = None
MFU_PROJECT = ("project", "project_before")
SNLI_PROJECT = ("project", "project_before")
SMOKE_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)


# ------------------------------------------------------------------ device, timing


def log(line: str) -> None:
    print(f"[gpu] {line}", file=sys.stderr, flush=True)


class Device:
    def __init__(self, cuda: bool):
        self.cuda, self.type = cuda, "cuda" if cuda else "cpu"
        self.name = torch.cuda.get_device_name() if cuda else "cpu"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def autocast(self):
        return torch.autocast(self.type, dtype=torch.bfloat16)

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def peak_gb(self) -> float | None:
        return round(torch.cuda.max_memory_allocated() / 2**30, 3) if self.cuda else None

    def free(self) -> None:
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def peak_tflops(name: str) -> float | None:
    if "H100" in name and "PCIe" in name:
        return 756.0
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def seconds(dev: Device, fn) -> float:
    """Wall seconds of ``fn()``, the device synchronised before and after."""
    dev.sync()
    t0 = time.perf_counter()
    fn()
    dev.sync()
    return time.perf_counter() - t0


def mean_step(dev: Device, step, warmup: int, steps: int) -> float:
    """Seconds per step: ``warmup`` steps, then ``steps`` timed together."""
    for _ in range(warmup):
        step()
    return seconds(dev, lambda: [step() for _ in range(steps)]) / steps


def update(opt, params=None) -> None:
    """Clip (when ``params`` is given: max norm 1.0, as the loop and HF's Trainer do), AdamW step, clear grads."""
    if params is not None:
        torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def guarded(name: str, fn, *args, **kwargs) -> dict:
    """``fn(...)``, or ``{"error": ...}`` if it raised (the run goes on)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - a benchmark part that fails is reported, not fatal
        log(f"{name}: {type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {str(e)[:500]}"}


def missing(*packages: str) -> dict | None:
    """``{"skipped": "no X package"}`` for the first of ``packages`` that does not import, else None."""
    for name in packages:
        try:
            importlib.import_module(name)
        except ImportError:
            return {"skipped": f"no {name} package"}
    return None


def temp_dir(prefix: str) -> Path:
    """A fresh folder, removed when the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def word_bert(config, prefix: str) -> Path:
    """Random-weight BERT + a word-level vocabulary ``w0 .. wN`` (as ``gpu_mfu`` builds it)."""
    from transformers import BertModel, BertTokenizerFast

    folder = temp_dir(prefix)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (folder / "vocab.txt").write_text("\n".join(special + [f"w{i}" for i in range(config.vocab_size - len(special))]))
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def compiles(name: str) -> bool:
    options = PROJECT_VARIANTS.get(name, {})
    return name == "stock_compiled" or bool(options.get("compile_layers"))


def step_options(trainee, dev: Device, options: dict):
    """Set a trainee up as train/loop.py does for ``options`` (a PROJECT_VARIANTS entry); returns the
    ``bf16_weights`` argument of ``forward_backward`` (None: autocast over the fp32 weights)."""
    from train.precision import Bf16Weights, resolve_precision

    encoder = trainee.encoder
    encoder.compile_layers = bool(options.get("compile_layers")) and encoder.unpad
    precision = resolve_precision(options.get("mixed_precision", "auto"), torch.device(dev.type))
    return Bf16Weights(encoder) if precision == "bf16_weights" else None


# ------------------------------------------------------------------ (a) MFU


def mfu_step(folder: Path, config, dev: Device, name: str):
    """``make(rows, seq)`` -> one training step of ``name`` on rows/2 random full-length sentences, each twice."""
    from transformers import BertModel

    from train.encoder import Encoder
    from train.loop import Trainee
    from train.methods.simcse_unsup import SimCSEUnsup
    from train.step import forward_backward

    copies = None
    if name.startswith("project"):
        trainee = Trainee(Encoder(str(folder), "cls", max_len=512, dropout=0.1),
                          SimCSEUnsup(SimCSEUnsup.Options(), hidden_size=config.hidden_size,
                                      temperature=TEMPERATURE)).to(dev.type)
        copies = step_options(trainee, dev, PROJECT_VARIANTS[name])
        params = trainee.parameters()
    else:
        model = BertModel.from_pretrained(str(folder), attn_implementation="sdpa").to(dev.type).train()
        model.pooler = None  # CLS of the last layer; an unused pooler would only cost time
        forward = torch.compile(model) if name == "stock_compiled" else model
        params = model.parameters()
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)

    def make(rows: int, seq: int):
        ids = torch.randint(5, config.vocab_size, (rows // 2, seq), device=dev.type)
        batch = {"sentence": {"input_ids": ids, "attention_mask": torch.ones_like(ids)}}
        labels = torch.arange(rows // 2, device=dev.type)

        def step():
            if name.startswith("project"):
                forward_backward(trainee, trainee, batch, autocast=dev.autocast, bf16_weights=copies)
            else:
                x = torch.cat([ids, ids])  # [x; x]: two dropout masks per sentence, as SimCSE-unsup
                with dev.autocast():
                    cls = forward(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[:, 0]
                    z1, z2 = F.normalize(cls.float(), dim=-1).chunk(2)
                    loss = F.cross_entropy(z1 @ z2.T / TEMPERATURE, labels)
                loss.backward()
            update(opt)

        return step

    return make


def mfu_part(S, dev: Device, smoke: bool, compile_on_cpu: bool) -> dict:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=1000, **SMOKE_BERT) if smoke else BertConfig()
    folder = word_bert(config, "bert-mfu-")
    with torch.device("meta"):  # shapes only
        n_params = sum(p.numel() for n, p in BertModel(config, add_pooling_layer=False).named_parameters()
                       if "embeddings" not in n)
    peak = peak_tflops(dev.name) if dev.cuda else None

    def measure(name: str) -> dict:
        compiled, out, make = compiles(name), {}, mfu_step(folder, config, dev, name)
        for rows, seq in S.mfu_shapes:
            step = make(rows, seq)
            first = seconds(dev, step) if compiled else None
            dt = mean_step(dev, step, S.mfu_warmup - (1 if compiled else 0), S.mfu_steps)
            tokens = rows * seq
            flops = tokens * (6 * n_params + 12 * config.num_hidden_layers * config.hidden_size * seq)
            res = {"tokens_per_s": round(tokens / dt), "tflops": round(flops / dt / 1e12, 3),
                   "mfu": round(flops / dt / 1e12 / peak, 3) if peak else None, "s_per_step": round(dt, 5)}
            if compiled:
                res["compile_s"] = round(first - dt, 2)
            if (rows, seq) == S.mfu_shapes[-1] and name in PROFILED:
                res["profile"] = profile_step(dev, step, f"(a) {name} {rows}x{seq}", PROFILE_FILE)
            out[f"{rows}x{seq}"] = res
            log(f"(a) {name} {rows}x{seq}: {res['tokens_per_s']} tokens/s, {res['tflops']} TFLOP/s, mfu {res['mfu']}"
                + (f", compile {res['compile_s']} s" if compiled else ""))
        return out

    results = {}
    for name in (*MFU_PROJECT, "stock_eager", "stock_compiled"):
        if compiles(name) and not dev.cuda and not compile_on_cpu:
            results[name] = {"skipped": "cpu smoke"}
            continue
        torch.manual_seed(0)
        results[name] = guarded(f"(a) {name}", measure, name)
        dev.free()
    return {"device": dev.name, "peak_bf16_tflops": peak, "flops_per_token": "6N + 12*L*d*seq",
            "N": n_params, "L": config.num_hidden_layers, "d": config.hidden_size, **results}


# ------------------------------------------------------------------ (b) SNLI MNRL at 512 pairs


def snli_pairs(snli_dir: Path | None) -> tuple[list[tuple[str, str]], str]:
    """(premise, entailment) pairs of SNLI dev + test in SentEval's layout (what ``ingest.pairs`` makes
    of them for bench/train.py), shuffled; synthetic sentences when the folder is absent."""
    pairs = []
    if snli_dir is not None and snli_dir.is_dir():
        for split in ("dev", "test"):
            files = [snli_dir / f"{name}.{split}" for name in ("s1", "s2", "labels")]
            if all(f.is_file() for f in files):
                s1, s2, labels = (f.read_text(encoding="utf-8").splitlines() for f in files)
                pairs += [(a.strip(), b.strip()) for a, b, y in zip(s1, s2, labels) if y.strip() == "entailment"]
    source = f"snli {snli_dir}"
    if not pairs:
        rng = random.Random(0)
        words = [f"w{i}" for i in range(2000)]
        sentence = lambda: " ".join(rng.choices(words, k=rng.randint(6, 20)))  # noqa: E731
        pairs, source = [(sentence(), sentence()) for _ in range(8000)], "synthetic"
    random.Random(0).shuffle(pairs)
    return pairs, source


def mnrl_model(texts: list[str], dev: Device, smoke: bool) -> Path:
    """BERT-base (smoke: 2 layers) with random weights and a WordPiece vocabulary of ``texts``."""
    from transformers import BertConfig, BertModel

    from train.tiny_bert import build_tiny_bert

    folder = temp_dir("bert-mnrl-")
    build_tiny_bert(texts, folder, vocab_size=3000 if smoke else 30522, max_position_embeddings=512)
    if not smoke:  # the tokenizer stays, the weights become BERT-base's shape (its vocabulary covers the tokenizer's)
        for old in folder.glob("*.safetensors*"):
            old.unlink()
        torch.manual_seed(0)
        BertModel(BertConfig()).save_pretrained(folder)
    return folder


def mnrl_trainee(path: Path, dev: Device, variant: str = "project"):
    """The loop's MNRL trainee (``simcse_sup`` without hard negatives), set up as ``variant``; returns
    (trainee, fused AdamW, the ``bf16_weights`` argument of its steps)."""
    from train.config import TrainConfig
    from train.loop import build_trainee

    cfg = TrainConfig.from_dict({"method": "simcse_sup", "simcse_sup": {"hard_negatives": False}, "model": str(path),
                                 "data": "-", "pooling": "mean", "dropout": None, "max_len": MAX_LEN,
                                 "temperature": TEMPERATURE})
    torch.manual_seed(0)
    trainee = build_trainee(cfg, {}).to(dev.type)
    copies = step_options(trainee, dev, PROJECT_VARIANTS[variant])
    return trainee, torch.optim.AdamW(trainee.parameters(), lr=LR, fused=True), copies


def rate(S, dev: Device, dt: float) -> dict:
    return {"pairs_per_s": round(S.pairs / dt, 1), "s_per_step": round(dt, 4), "peak_mem_gb": dev.peak_gb()}


def snli_project(path: Path, batches, S, dev: Device, variant: str = "project") -> dict:
    import numpy as np

    from train.batch import collated_ahead, to_device
    from train.step import forward_backward

    trainee, opt, copies = mnrl_trainee(path, dev, variant)
    texts = ({"premise": np.array([a for a, _ in chunk], dtype=object),
              "entailment": np.array([p for _, p in chunk], dtype=object)} for chunk in itertools.cycle(batches))
    collate = functools.partial(trainee.method.collate, encoder=trainee.encoder)
    # as the loop: on CUDA the next batch is tokenized in a thread while this one's step runs
    rows = collated_ahead(texts, collate) if dev.cuda else ((t, collate(t)) for t in texts)
    losses = []

    def step():
        _, batch = next(rows)
        torch.manual_seed(len(losses))  # the dropout masks of step i, as the loop seeds them
        loss, _ = forward_backward(trainee, trainee, to_device(batch, dev.type), autocast=dev.autocast,
                                   bf16_weights=copies)
        losses.append(loss.detach())
        update(opt, trainee.parameters())

    dev.reset_peak()
    compiled = compiles(variant)
    first = seconds(dev, step) if compiled else None
    out = rate(S, dev, mean_step(dev, step, S.snli_warmup - (1 if compiled else 0), S.snli_steps))
    if compiled:
        out["compile_s"] = round(first - out["s_per_step"], 2)
    out["losses"] = [round(float(x), 4) for x in losses]
    if variant in PROFILED:
        out["profile"] = profile_step(dev, step, f"(b) {variant} SNLI {S.pairs} pairs", PROFILE_FILE)
    return out


def snli_plain(path: Path, batches, S, dev: Device) -> dict:
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).to(dev.type).train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
    labels = torch.arange(S.pairs, device=dev.type)
    rows = iter(batches)

    def embed(texts):
        enc = tokenizer(texts, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt").to(dev.type)
        hidden = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return F.normalize(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).float(), dim=-1)

    def step():
        chunk = next(rows)
        with dev.autocast():
            a, p = embed([a for a, _ in chunk]), embed([p for _, p in chunk])
            loss = F.cross_entropy(a @ p.T / TEMPERATURE, labels)
        loss.backward()
        update(opt, model.parameters())

    dev.reset_peak()
    return rate(S, dev, mean_step(dev, step, S.snli_warmup, S.snli_steps))


# SentenceTransformerTrainer's settings tried (bf16 and fused AdamW in all, on a GPU): its default batch sampler or
# NO_DUPLICATES (its docs' advice for in-batch negatives), tokenization in the main process or in 4 dataloader
# workers (its collator tokenizes there); the fastest is the anchor
ST_CONFIGS = {
    "default": {},
    "no_duplicates": {"batch_sampler": "no_duplicates"},
    "workers": {"dataloader_num_workers": 4},
    "no_duplicates_workers": {"batch_sampler": "no_duplicates", "dataloader_num_workers": 4},
}


def snli_st_trainer(path: Path, batches, S, dev: Device, config: str | None = None) -> dict:
    if skipped := missing("datasets", "accelerate"):
        return skipped
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    from transformers import TrainerCallback

    torch.manual_seed(0)
    model = SentenceTransformer(str(path), device=dev.type)
    model.max_seq_length = MAX_LEN
    # twice the rows the steps take: NO_DUPLICATES leaves a batch's duplicates for later batches, so an epoch of
    # exactly steps x batch rows ends early
    rows = [pair for chunk in batches for pair in chunk] * 2
    data = Dataset.from_dict({"anchor": [a for a, _ in rows], "positive": [p for _, p in rows]})
    marks: list[float] = []

    class Timer(TrainerCallback):  # ends of the last warm-up step and of the last step: data + tokenization count
        def on_step_end(self, args, state, control, **kw):
            if state.global_step in (S.snli_warmup, S.snli_warmup + S.snli_steps):
                dev.sync()
                marks.append(time.perf_counter())

    # its docs' settings for speed: bf16, fused AdamW, the NO_DUPLICATES sampler for in-batch negatives,
    # tokenization in dataloader workers (its collator tokenizes there), pinned memory; the same max length
    chosen = ST_CONFIGS[config or "no_duplicates_workers"]
    workers = min(chosen.get("dataloader_num_workers", 0), S.st_workers)
    best = {"bf16": dev.cuda, "optim": "adamw_torch_fused" if dev.cuda else "adamw_torch",
            "batch_sampler": BatchSamplers(chosen.get("batch_sampler", "batch_sampler")),
            "dataloader_num_workers": workers, "dataloader_pin_memory": dev.cuda,
            "dataloader_persistent_workers": workers > 0, "dataloader_prefetch_factor": 4 if workers > 0 else None}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(temp_dir("st-trainer-")), per_device_train_batch_size=S.pairs, max_steps=S.snli_warmup + S.snli_steps,
        learning_rate=LR, warmup_steps=0, save_strategy="no", report_to="none", logging_strategy="no",
        dataloader_drop_last=True, use_cpu=not dev.cuda, seed=0, disable_tqdm=True, **best,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data,
                                         loss=MultipleNegativesRankingLoss(model, scale=1 / TEMPERATURE),
                                         callbacks=[Timer()])
    dev.reset_peak()
    trainer.train()
    config = {k: str(v) for k, v in best.items()} | {"max_seq_length": MAX_LEN, "padding": "longest (its collator)",
                                                      "max_grad_norm": args.max_grad_norm}
    return {**rate(S, dev, (marks[-1] - marks[0]) / S.snli_steps), "sentence_transformers": st_version(),
            "config": config}


def snli_batches(pairs, S) -> list[list[tuple[str, str]]]:
    need = S.pairs * (S.snli_warmup + S.snli_steps)
    rows = [pairs[i % len(pairs)] for i in range(need)]  # cycled if the set is smaller
    return [rows[i : i + S.pairs] for i in range(0, need, S.pairs)]


def snli_st_only(path: Path, pairs, S, dev: Device) -> dict:
    """(b)'s ``st_trainer`` in each of ``ST_CONFIGS`` (run with another sentence-transformers version first on
    PYTHONPATH too); the fastest at the top level."""
    out = {}
    for name in ST_CONFIGS:
        out[name] = guarded(f"(e) st_trainer {name}", snli_st_trainer, path, snli_batches(pairs, S), S, dev, name)
        log(f"(e) st_trainer {name}: {out[name]}")
        dev.free()
    fastest = max((k for k in out if "pairs_per_s" in out[k]), key=lambda k: out[k]["pairs_per_s"], default=None)
    return {**(out[fastest] if fastest else {}), "fastest": fastest, "configs": out}


def snli_repeats(path: Path, pairs, S, dev: Device, rounds: int = 3) -> dict:
    """(b)'s project variants again, alternating, ``rounds`` times: the spread between runs."""
    batches = snli_batches(pairs, S)
    out = {name: [] for name in SNLI_PROJECT}
    for _ in range(rounds):
        for name in SNLI_PROJECT:
            res = guarded(f"(r) {name}", snli_project, path, batches, S, dev, variant=name)
            out[name].append(res.get("pairs_per_s"))
            dev.free()
    log(f"(r) pairs/s per round: {out}")
    return out


def gradcache_tile(path: Path, S, dev: Device, tile: int = 8192) -> dict:
    """(c)'s uncached step and its GradCache step at ``S.compare`` pairs with ``loss_tile`` = ``tile``."""
    S = SimpleNamespace(**{**vars(S), "loss_tile": tile})
    return largest_project(path, S, dev, sizes=(S.compare,))


def snli_part(path: Path, pairs, source: str, S, dev: Device) -> dict:
    batches = snli_batches(pairs, S)
    out = {"pairs": S.pairs, "data": source, "max_len": MAX_LEN, "precision": "bf16" if dev.cuda else "bf16 autocast (st: fp32)"}
    runs = [(name, snli_project, {"variant": name}) for name in SNLI_PROJECT]
    runs += [("plain", snli_plain, {}), ("st_trainer", snli_st_trainer, {})]
    for name, fn, kw in runs:
        out[name] = guarded(f"(b) {name}", fn, path, batches, S, dev, **kw)
        log(f"(b) {name}: {out[name]}")
        dev.free()
    sps = {k: out[k].get("pairs_per_s") for k in (*SNLI_PROJECT, "plain", "st_trainer")}
    for mine in ("project", "project_before"):
        for other in ("st_trainer", "plain"):
            out[f"{mine}_vs_{other}"] = round(sps[mine] / sps[other], 3) if sps[mine] and sps[other] else None
    # the same batches from the same weights: bf16 weights against autocast over fp32 weights (the reference)
    ref = out["project_before"].get("losses")
    for name in SNLI_PROJECT[:1] + SNLI_PROJECT[2:]:
        new = out[name].get("losses")
        if ref and new:
            out[f"{name}_loss_max_rel_diff_vs_before"] = round(max(abs(a - b) / abs(b) for a, b in zip(new, ref)), 4)
    return out


# ------------------------------------------------------------------ (c) largest batch


def token_column(n: int, lo: int, hi: int, vocab: int, cls_id: int, sep_id: int, device: str) -> dict:
    """What ``collate`` makes of a text column: ``[CLS] ... [SEP]`` rows of ``lo..hi`` tokens, padded to
    the longest (``input_ids``, ``token_type_ids``, ``attention_mask``, int64)."""
    lengths = torch.randint(lo, hi + 1, (n,), device=device)
    mask = (torch.arange(int(lengths.max()), device=device)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, vocab, mask.shape, device=device) * mask
    ids[:, 0] = cls_id
    ids[torch.arange(n, device=device), lengths - 1] = sep_id
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}


def pair_tokens(n: int, tokenizer, device: str) -> dict:
    torch.manual_seed(n)
    args = (len(tokenizer), tokenizer.cls_token_id, tokenizer.sep_token_id, device)
    return {"premise": token_column(n, 10, 24, *args), "entailment": token_column(n, 6, 13, *args)}


def tensor_gb(batch: dict) -> float:
    return round(sum(t.numel() * t.element_size() for col in batch.values() for t in col.values()) / 2**30, 3)


def pair_runner(dev: Device, tokenizer, make_step):
    """``run(n, warmup, steps)``: ``make_step(batch)`` on ``n`` pre-built pairs, ``warmup`` steps, then the
    median seconds of ``steps`` (each synchronised) and their peak memory (grads cleared after)."""

    def run(n: int, warmup: int, steps: int, **kw) -> dict:
        batch = pair_tokens(n, tokenizer, dev.type)
        step, opt = make_step(batch, **kw)
        try:
            for _ in range(warmup):
                step()
            dev.reset_peak()
            times = [seconds(dev, step) for _ in range(steps)]
            return {"s_per_step": round(statistics.median(times), 4), "peak_mem_gb": dev.peak_gb(),
                    "warmup_steps": warmup, "steps": steps, "input_gb": tensor_gb(batch)}
        finally:
            opt.zero_grad(set_to_none=True)

    return run


def sizes_with_oom(name: str, sizes, run, S, dev: Device) -> dict:
    """``run(n, warmup, steps)`` at each size; out of memory -> {"oom": true}, and larger sizes are skipped.
    The largest size gets no warm-up step when the one before projects it past ``warmup_budget_s``."""
    out, last = {}, None
    for n in sizes:
        if any(r.get("oom") for r in out.values()):
            out[str(n)] = {"skipped": "a smaller size ran out of memory"}
            continue
        warmup = 1
        if n == sizes[-1] and n > S.compare and (last is None or last[1] * n / last[0] > S.warmup_budget_s):
            warmup = 0
        try:
            res = run(n, warmup, 3 if n < S.compare else 2 if n == S.compare else 1)
        except (torch.OutOfMemoryError, RuntimeError) as e:  # cuBLAS / NCCL allocations fail as RuntimeError
            if not isinstance(e, torch.OutOfMemoryError) and "out of memory" not in str(e).lower():
                raise
            res = {"oom": True, "error": str(e).splitlines()[0][:200]}
        res = {"pairs": n, **res}
        if "s_per_step" in res:
            res["us_per_pair"] = round(res["s_per_step"] / n * 1e6, 3)
            last = (n, res["s_per_step"])
        out[str(n)] = res
        log(f"(c) {name} {n} pairs: {res}")
        dev.free()
    return out


def largest_project(path: Path, S, dev: Device, sizes=None, uncached: bool = True) -> dict:
    """The project's GradCache step at ``sizes`` (default ``S.largest``), after the uncached step at
    ``S.uncached`` pairs (``uncached``)."""
    from train.step import forward_backward

    trainee, opt, copies = mnrl_trainee(path, dev)
    if S.loss_tile:
        trainee.method.loss_tile = S.loss_tile

    def make_step(batch, chunk: int | None = S.chunk):
        def step():
            forward_backward(trainee, trainee, batch, chunk_size=chunk, autocast=dev.autocast, bf16_weights=copies)
            update(opt, trainee.parameters())

        return step, opt

    run = pair_runner(dev, trainee.encoder.tokenizer, make_step)
    out = {"chunk_size": S.chunk, "loss_tile": trainee.method.loss_tile}
    if not uncached:
        return {**out, **sizes_with_oom("project gradcache", sizes or S.largest, run, S, dev)}
    uncached = {"pairs": S.uncached, **run(S.uncached, 3, 5, chunk=None)}  # one chunk's pairs, no GradCache
    uncached["us_per_pair"] = round(uncached["s_per_step"] / S.uncached * 1e6, 3)
    log(f"(c) project uncached {S.uncached} pairs: {uncached}")
    out = {**out, "uncached": uncached, **sizes_with_oom("project gradcache", sizes or S.largest, run, S, dev)}
    compare = out.get(str(S.compare), {})
    out[f"gradcache_vs_uncached_per_pair_{S.compare}"] = (
        round(compare["us_per_pair"] / uncached["us_per_pair"], 3) if "us_per_pair" in compare else None)
    return out


def largest_st_cached(path: Path, S, dev: Device) -> dict:
    if skipped := missing("datasets"):
        return skipped
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss

    torch.manual_seed(0)
    model = SentenceTransformer(str(path), device=dev.type)
    model.max_seq_length = MAX_LEN
    model.train()
    loss_fn = CachedMultipleNegativesRankingLoss(model, scale=1 / TEMPERATURE, mini_batch_size=S.st_mini)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)

    def make_step(batch):
        def step():
            with dev.autocast():  # the backward too: its hook replays the mini-batch forwards
                loss = loss_fn([dict(batch["premise"]), dict(batch["entailment"])], None)
                loss.backward()
            update(opt, model.parameters())

        return step, opt

    run = pair_runner(dev, model.tokenizer, make_step)
    return {"mini_batch_size": S.st_mini, **sizes_with_oom("st_cached", S.st_cached, run, S, dev)}


def loss_tiles(S, dev: Device) -> dict:
    """The MNRL loss alone (forward + backward, d = 768) at the 65,536-pair size, per ``loss_tile``: what
    the default tile (train/methods/tiled.py, chosen on CPU) should be on this device. ``fastest``: the
    tile (c)'s GradCache sizes then run with."""
    from bench.loss_checks import loss_seconds

    n = S.largest[min(1, len(S.largest) - 1)]
    tiles = [t for t in (1024, 2048, 4096, 8192, 16384) if t < n] or [n // 4]
    seconds = loss_seconds(n, 768, tiles, repeats=2, device=dev.type)
    fastest = min(tiles, key=lambda t: seconds[f"tile{t}"])
    return {"pairs": n, "d": 768, "seconds": seconds, "fastest": fastest}


def largest_part(path: Path, S, dev: Device) -> dict:
    out = {"inputs": "pre-built token tensors: premise 10-24 tokens, entailment 6-13, padded per column"}
    # first: the loss's tile on this device (at a million pairs the loss is 262,144 tiles of 2,048 a pass,
    # each a few kernel launches: on an H100 the 1,048,576-pair step ran past 250 s with the CPU's tile)
    out["loss_tiles"] = guarded("(c) loss_tiles", loss_tiles, S, dev)
    dev.free()
    if S.loss_tile is None and "fastest" in out["loss_tiles"]:
        S = SimpleNamespace(**{**vars(S), "loss_tile": out["loss_tiles"]["fastest"]})
    # the largest size last (one step, minutes): what a time limit cuts is then only that
    smaller, largest = S.largest[:-1], S.largest[-1]
    out["project"] = guarded("(c) project", largest_project, path, S, dev, sizes=smaller)
    dev.free()
    out["st_cached"] = guarded("(c) st_cached", largest_st_cached, path, S, dev)
    dev.free()
    biggest = guarded("(c) project", largest_project, path, S, dev, sizes=(largest,), uncached=False)
    if isinstance(out["project"], dict) and "error" not in out["project"]:
        out["project"][str(largest)] = biggest.get(str(largest), biggest)
    dev.free()
    return out


# ------------------------------------------------------------------ main


def st_version() -> str | None:
    try:  # not imported: it needs ``datasets``
        import sentence_transformers

        return sentence_transformers.__version__
    except ImportError:
        try:
            return metadata.version("sentence-transformers")
        except metadata.PackageNotFoundError:
            return None


def versions(dev: Device) -> dict:
    import transformers

    return {"device": dev.name, "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": st_version()}


def vs_best_st_trainer(result: dict) -> float | None:
    """The project's SNLI pairs/s over the fastest ``SentenceTransformerTrainer`` measured (part b's with the
    machine's sentence-transformers, part e's ``st_trainer_<version>`` in each of its settings)."""
    snli = result.get("snli_mnrl", {})
    mine = snli.get("project", {}).get("pairs_per_s")
    runs = [snli.get("st_trainer", {})] + [v for k, v in result.items() if k.startswith("st_trainer_")]
    theirs = [r.get("pairs_per_s") for r in runs if isinstance(r, dict) and r.get("pairs_per_s")]
    return round(mine / max(theirs), 3) if mine and theirs else None


def ahead_of_stock_compiled(result: dict) -> bool | None:
    mfu = result.get("mfu", {})
    mine, stock = mfu.get("project", {}), mfu.get("stock_compiled", {})
    shapes = [k for k in stock if isinstance(stock[k], dict) and "tokens_per_s" in stock[k]]
    if not shapes or not all(isinstance(mine.get(k), dict) and "tokens_per_s" in mine[k] for k in shapes):
        return None
    return all(mine[k]["tokens_per_s"] > stock[k]["tokens_per_s"] for k in shapes)


def checks(result: dict, smoke: bool) -> dict:
    keys = ("mfu_512x128_ge_0.40", "ahead_of_stock_compiled_all_shapes", "vs_best_st_trainer_ge_1.8",
            "gradcache_65536_le_16gb", "gradcache_65536_per_pair_le_1.25x", "one_step_1048576")
    if smoke:
        return {**dict.fromkeys(keys), "device_checks": None}
    project = result.get("largest_batch", {}).get("project", {})
    values = (result.get("mfu", {}).get("project", {}).get("512x128", {}).get("mfu"), ahead_of_stock_compiled(result),
              vs_best_st_trainer(result), project.get("65536", {}).get("peak_mem_gb"),
              project.get("gradcache_vs_uncached_per_pair_65536"))
    oks = (lambda v: v >= 0.40, bool, lambda v: v >= 1.8, lambda v: v <= 16, lambda v: v <= 1.25)
    out = {key: None if v is None else bool(ok(v)) for key, v, ok in zip(keys, values, oks)}
    out["project_vs_best_st_trainer"] = values[2]
    out[keys[5]] = None if "1048576" not in project else "s_per_step" in project["1048576"]
    out["device_checks"] = result.get("device_checks", {}).get("all")
    return out


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", nargs="+", default=["d", "b", "a", "c"], choices=["a", "b", "c", "d", "e", "r", "g"],
                    help="run in this order; e: (b)'s SentenceTransformerTrainer alone (another sentence-transformers "
                         "version on PYTHONPATH), kept as st_trainer_other")
    ap.add_argument("--profile", type=Path, default=None, help="append torch.profiler tables of the project's steps here")
    ap.add_argument("--save", type=Path, default=None, help="write the result so far here after every part")
    ap.add_argument("--merge", type=Path, nargs="+", default=None,
                    help="print one result of several runs' JSON files (parts split over runs), its checks recomputed")
    ap.add_argument("--smoke", action="store_true", help="the smoke sizes (tiny BERT) even on a GPU (they run there)")
    ap.add_argument("--snli-dir", type=Path, default=REPO.parent / "shared" / "data" / "nli" / "snli_senteval")
    ap.add_argument("--compile-on-cpu", action="store_true", help="smoke: run the torch.compile steps too (slow)")
    ap.add_argument("--no-loss", action="store_true", help="skip bench/tiled_loss.py's CPU loss figures")
    ap.add_argument("--cpu-loss", action="store_true", help="on a GPU machine, measure the CPU loss figures too")
    return ap.parse_args(argv)


def gpu_parts(args) -> dict:
    """Parts (a)-(c) as one dict (device, versions, ``mfu``, ``snli_mnrl``, ``largest_batch``, ``checks``)."""
    global PROFILE_FILE
    parts = getattr(args, "parts", None) or ["d", "b", "a", "c"]
    PROFILE_FILE = getattr(args, "profile", None)
    dev = Device(torch.cuda.is_available())
    smoke = getattr(args, "smoke", False) or not dev.cuda  # on a GPU, --smoke runs the tiny sizes there
    S = SMOKE_SIZES if smoke else GPU_SIZES
    result = {**versions(dev), "smoke": smoke}
    log(f"device {dev.name}, parts {' '.join(parts)}{' (smoke sizes)' if smoke else ''}")
    took, started, threads = {}, time.perf_counter(), torch.get_num_threads()
    if not dev.cuda:  # one thread: a CPU smoke beside other busy processes is not stalled in OpenMP barriers
        torch.set_num_threads(1)

    def part(key: str, name: str, fn):
        t0 = time.perf_counter()
        result[name] = guarded(f"({key})", fn)
        dev.free()
        took[key] = round(time.perf_counter() - t0, 1)
        log(f"({key}) {name} done in {took[key]} s ({time.perf_counter() - started:.0f} s so far)")
        if getattr(args, "save", None):
            args.save.write_text(json.dumps({**result, "seconds": took}) + "\n")

    path = None
    if {"b", "c", "d", "e", "r", "g"} & set(parts):
        pairs, source = snli_pairs(getattr(args, "snli_dir", None))
        path = mnrl_model([t for pair in pairs for t in pair], dev, smoke)
        log(f"{len(pairs)} pairs ({source}); encoder {path}")
    runs = {
        "a": ("mfu", lambda: mfu_part(S, dev, smoke, getattr(args, "compile_on_cpu", False))),
        "b": ("snli_mnrl", lambda: snli_part(path, pairs, source, S, dev)),
        "c": ("largest_batch", lambda: largest_part(path, S, dev)),
        "d": ("device_checks", lambda: device_checks(dev, pairs, str(path), smoke)),
        "e": (f"st_trainer_{st_version()}", lambda: snli_st_only(path, pairs, S, dev)),
        "r": ("snli_repeats", lambda: snli_repeats(path, pairs, S, dev)),
        "g": ("gradcache_tile8192", lambda: gradcache_tile(path, S, dev)),
    }
    for key in parts:
        part(key, *runs[key])
    torch.set_num_threads(threads)
    result["checks"] = checks(result, smoke)
    result["seconds"] = {**took, "total": round(time.perf_counter() - started, 1)}
    return result


def merged(files: list[Path]) -> dict:
    """One result of runs that each measured some parts on the same device (the first file's versions)."""
    runs = [json.loads(f.read_text().strip().splitlines()[-1]) for f in files]
    if len({r["device"] for r in runs}) != 1:
        raise SystemExit(f"--merge: the runs are from different devices: {[r['device'] for r in runs]}")
    result = dict(runs[0])
    for run in runs[1:]:
        result.update({k: v for k, v in run.items()
                       if k in ("mfu", "snli_mnrl", "largest_batch", "device_checks", "snli_repeats",
                                "gradcache_tile8192") or k.startswith("st_trainer_")})
    result["seconds"] = {k: v for run in runs for k, v in run.get("seconds", {}).items() if k != "total"}
    result["seconds"]["total"] = round(sum(result["seconds"].values()), 1)
    result["checks"] = checks(result, result.get("smoke", False))
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        print(json.dumps(merged(args.merge)))
        return 0
    result = gpu_parts(args)
    exact = True
    # part 4, the tiled loss on CPU (bench/tiled_loss.py): measured for real on a machine without a GPU
    # (--smoke: its small sizes); on a GPU machine only with --cpu-loss (it would spend device time on CPU work)
    if not args.no_loss and (result["device"] == "cpu" or args.cpu_loss):
        from bench.loss_checks import loss_figures

        figures = guarded("tiled_loss", loss_figures, smoke=args.smoke)
        result["tiled_loss"] = figures
        if "tiled_equals_dense" in figures:
            exact = figures["tiled_equals_dense"]["all"]
            result["tiled_equals_dense"] = exact
            result.update({k: v for k, v in figures.items() if k.startswith("loss_peak_gb_")})
    print(json.dumps(result))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
