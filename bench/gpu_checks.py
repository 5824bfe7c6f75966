"""bench/gpu.py's part (d): the CPU exactness tests' claims checked on the device, and ``--profile``'s
tables of the steps it times.

* ``tiled_equals_dense``: every method's tiled loss against the dense oracle (``bench/tiled_loss.py``'s
  cases) in float64 (relative error <= 1e-9) and under bf16 autocast as a GPU step runs it (<= 3e-2:
  the two round their bf16 products differently; the log-sum-exp is float32 in both).
* ``float64_rel_err``: GradCache's gradients against encoding the same chunks with grad and one
  backward, with dropout 0.1 (the replayed masks), eager and with the compiled per-token layers; and
  compiled against eager (dropout 0): a 2-layer BERT in float64, <= 1e-9 of the largest gradient entry.
* ``bf16_grad_rel_err_vs_float64``: BERT-base's gradients (dropout 0) in each bf16 way of running the
  step against float64: autocast over fp32 weights (the reference), train.precision's bf16 weights,
  those with the compiled layers, and with GradCache chunks. Each is held to twice the reference's
  error (+ 1e-3): an untrained encoder embeds sentences alike, so its contrastive gradients are
  differences of near-equal terms and no bf16 run is close to float64 in absolute terms. Held on a
  GPU only: on CPU the errors are reported (``CPU_BF16_SUMS`` says why they are not held there).

Two workers against one big batch (``tests/test_train_scale.py``) needs a GPU per worker (NCCL refuses
two ranks on one device); on one GPU GradCache's equality is the same sum over rows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

# why the bf16-weights errors are a device claim: with autocast the embedding tables and LayerNorms run in float32
CPU_BF16_SUMS = ("CPU's bf16 nn.Embedding and LayerNorm backwards sum their rows in bf16 (4,000 rows: 14% and 4% "
                 "of the largest entry, a bf16 Linear's bias 0.24%); CUDA's kernels accumulate them in float32 (acc_type)")
SMALL_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def _small_bert(texts: list[str]) -> str:
    import tempfile

    from train.tiny_bert import build_tiny_bert

    folder = Path(tempfile.mkdtemp(prefix="bert-checks-"))
    build_tiny_bert(texts, folder, vocab_size=500, hidden_size=SMALL_BERT["hidden_size"],
                    num_layers=SMALL_BERT["num_hidden_layers"], num_heads=SMALL_BERT["num_attention_heads"],
                    intermediate_size=SMALL_BERT["intermediate_size"], max_position_embeddings=64)
    return str(folder)


def _trainee(model: str, device: str, dtype, dropout: float):
    from train.config import TrainConfig
    from train.loop import build_trainee

    cfg = TrainConfig.from_dict({"method": "simcse_sup", "model": model, "data": "-", "pooling": "mean",
                                 "dropout": dropout, "max_len": 32})
    torch.manual_seed(0)
    return build_trainee(cfg, {}).to(device=device, dtype=dtype)


def _grads(trainee) -> dict:
    out = {n: p.grad.detach().double().clone() for n, p in trainee.named_parameters() if p.grad is not None}
    trainee.zero_grad(set_to_none=True)
    return out


def _rel(got: dict, ref: dict) -> float:
    scale = max(float(r.abs().max()) for r in ref.values())
    return max(float((got[k] - r).abs().max()) for k, r in ref.items()) / scale


def _batch(trainee, pairs, rows: int, device: str) -> dict:
    import numpy as np

    from train.batch import to_device

    chosen = pairs[:rows]
    columns = {"premise": [a for a, _, _ in chosen], "entailment": [b for _, b, _ in chosen],
               "contradiction": [c for _, _, c in chosen]}
    batch = trainee.method.collate({k: np.array(v, dtype=object) for k, v in columns.items()}, trainee.encoder)
    return to_device(batch, device)


def grad_cache_check(model: str, pairs, device: str, dtype, compiled: bool, bf16_weights: bool,
                     rows: int = 48, chunk: int = 12) -> float:
    """Relative gradient error of GradCache against the chunks encoded with grad, one backward."""
    import contextlib

    from train.batch import cat_rows, slice_rows
    from train.precision import Bf16Weights
    from train.step import forward_backward

    trainee = _trainee(model, device, dtype, dropout=0.1)
    trainee.encoder.compile_layers = compiled
    batch = _batch(trainee, pairs, rows, device)
    copies = Bf16Weights(trainee.encoder) if bf16_weights else None
    autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if bf16_weights else contextlib.nullcontext
    torch.manual_seed(7)
    with copies.step() if copies else contextlib.nullcontext():
        with autocast():
            parts = [trainee.method.embed(trainee.encoder, slice_rows(batch, s, s + chunk)) for s in range(0, rows, chunk)]
            loss, _ = trainee.method.loss_from_embeddings(cat_rows(parts), batch)
        loss.backward()
        if copies:
            copies.flush()
    reference = _grads(trainee)
    torch.manual_seed(7)
    forward_backward(trainee, trainee, batch, chunk_size=chunk, autocast=autocast, bf16_weights=copies)
    return _rel(_grads(trainee), reference)


def compiled_check(model: str, pairs, device: str, dtype, rows: int = 48) -> float:
    """Relative gradient error of the compiled per-token layers against eager (dropout 0)."""
    from train.step import forward_backward

    results = []
    for compiled in (False, True):
        trainee = _trainee(model, device, dtype, dropout=0.0)
        trainee.encoder.compile_layers = compiled
        forward_backward(trainee, trainee, _batch(trainee, pairs, rows, device))
        results.append(_grads(trainee))
    return _rel(results[1], results[0])


def bf16_errors(model: str, pairs, device: str, rows: int = 48, chunk: int = 12) -> dict:
    """Each bf16 way of running the step against the float64 step (dropout 0, the same rows): relative
    gradient error, autocast over fp32 weights (the reference) beside bf16 weights eager, compiled,
    and compiled with GradCache chunks."""
    import contextlib

    from train.precision import Bf16Weights
    from train.step import forward_backward

    def grads(dtype, precision: str | None, compiled: bool = False, chunk_size: int | None = None) -> dict:
        trainee = _trainee(model, device, dtype, dropout=0.0)
        trainee.encoder.compile_layers = compiled
        copies = Bf16Weights(trainee.encoder) if precision == "bf16_weights" else None
        autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if precision else contextlib.nullcontext
        forward_backward(trainee, trainee, _batch(trainee, pairs, rows, device), chunk_size=chunk_size,
                         autocast=autocast, bf16_weights=copies)
        return _grads(trainee)

    truth = grads(torch.float64, None)
    return {"autocast": _rel(grads(torch.float32, "bf16"), truth),
            "bf16_weights": _rel(grads(torch.float32, "bf16_weights"), truth),
            "bf16_weights_compiled": _rel(grads(torch.float32, "bf16_weights", True), truth),
            "bf16_weights_compiled_grad_cache": _rel(grads(torch.float32, "bf16_weights", True, chunk), truth)}


def device_checks(dev, pairs: list[tuple[str, str]], base_model: str | None, smoke: bool) -> dict:
    """Part (d). ``pairs``: (premise, entailment) texts; ``base_model``: the BERT-base folder of (b)/(c)
    for the bf16 errors (None: the small BERT)."""
    from bench.loss_checks import exactness

    t0 = time.perf_counter()
    device = dev.type
    triples = [(a, b, pairs[(i + 1) % len(pairs)][1]) for i, (a, b) in enumerate(pairs[:256])]
    n, d = (300, 32) if smoke else (2000, 256)
    out = {"tiled_equals_dense": {
        "float64": exactness(n, d, n // 3, device=device, dtype=torch.float64, rel=1e-9),
        "bf16_autocast": exactness(n, d, n // 3, device=device, rel=3e-2, autocast=True)}}
    for v in out["tiled_equals_dense"].values():
        v["worst_grad_rel_err"] = max(m["grad_rel_err"] for m in v["methods"].values())
        v.pop("methods")
    small = _small_bert([t for triple in triples for t in triple])
    exact = {"grad_cache_float64_eager": grad_cache_check(small, triples, device, torch.float64, False, False),
             "grad_cache_float64_compiled": grad_cache_check(small, triples, device, torch.float64, True, False),
             "compiled_equals_eager_float64": compiled_check(small, triples, device, torch.float64)}
    out["float64_rel_err"] = {k: float(f"{v:.3g}") for k, v in exact.items()}
    errors = bf16_errors(base_model or small, triples, device)
    out["bf16_grad_rel_err_vs_float64"] = {k: float(f"{v:.3g}") for k, v in errors.items()}
    # bf16 rounds: each bf16 way is held to the reference it replaces (autocast over fp32 weights)
    bound = 2 * errors["autocast"] + 1e-3
    out["limits"] = {"float64_rel_err": 1e-9, "bf16_grad_rel_err_vs_float64": f"<= 2 x autocast's + 1e-3 = {bound:.3g}"}
    held = errors
    if device != "cuda":  # bf16 weights are a GPU mode (the config refuses them on CPU)
        held = {}
        out["limits"]["bf16_grad_rel_err_vs_float64"] += f" on a GPU; not held on {device}: {CPU_BF16_SUMS}"
    out["all"] = (all(v["all"] for v in out["tiled_equals_dense"].values())
                  and all(v <= 1e-9 for v in exact.values()) and all(v <= bound for v in held.values()))
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# ------------------------------------------------------------------ --profile

SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "aten::_local_scalar_dense",
               "aten::nonzero", "aten::item")


def profile_step(dev, step, label: str, out_file: Path | None) -> dict | None:
    """One ``step()`` under torch.profiler (after the caller's warm-up): wall, host and device time, kernel
    launches, host syncs, and the top ops by device time, appended to ``out_file``."""
    if out_file is None:
        return None
    try:
        return _profile_step(dev, step, label, out_file)
    except Exception as e:  # noqa: BLE001 - a profile that fails must not take the timing it follows with it
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def _profile_step(dev, step, label: str, out_file: Path) -> dict:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.cuda else [])
    dev.sync()
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        step()
        dev.sync()
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    sort = "self_cuda_time_total" if dev.cuda else "self_cpu_time_total"
    cpu_us = sum(e.self_cpu_time_total for e in events)
    # the kernels themselves (an inductor kernel is listed twice in key_averages: as its op and its kernel)
    cuda_us = sum(e.time_range.elapsed_us() for e in prof.events()
                  if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA) if dev.cuda else 0
    counts = {e.key: e.count for e in events}
    summary = {"wall_ms": round(wall * 1e3, 2), "host_ms": round(cpu_us / 1e3, 2), "device_ms": round(cuda_us / 1e3, 2),
               "kernel_launches": counts.get("cudaLaunchKernel", 0) + counts.get("cuLaunchKernel", 0)
               + counts.get("cudaLaunchKernelExC", 0),
               "syncs": {k: counts[k] for k in SYNC_EVENTS if k in counts}}
    with open(out_file, "a") as f:
        f.write(f"=== {label}: {json.dumps(summary)}\n")
        f.write(events.table(sort_by=sort, row_limit=25, max_name_column_width=70) + "\n\n")
    return summary
