"""The tiled losses' checks, shared by ``bench/tiled_loss.py`` (CPU) and ``bench/gpu.py`` (a GPU): exactness of
every method's tiled loss against the dense oracle, one loss's peak memory in a fresh process, and its seconds
beside the dense loss (the figures' meaning: ``bench/tiled_loss.py``'s docstring)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.harness import REPO


def _exact(tiled, dense, inputs, rel=1e-5) -> dict:
    import torch

    want = dense()
    want_grads = torch.autograd.grad(want, inputs)
    got = tiled()
    got_grads = torch.autograd.grad(got, inputs)
    scale = max(float(g.abs().max()) for g in want_grads)
    grad_err = max(float((g - w).abs().max()) for g, w in zip(got_grads, want_grads)) / scale
    loss_err = abs(float(got.detach()) - float(want.detach())) / max(abs(float(want.detach())), 1e-6)
    return {"loss_rel_err": float(f"{loss_err:.3g}"), "grad_rel_err": float(f"{grad_err:.3g}"),
            "equal": loss_err <= rel and grad_err <= rel}


def exactness(n: int = 1000, d: int = 64, tile: int = 384, device: str = "cpu", dtype=None, rel: float = 1e-5,
              autocast: bool = False) -> dict:
    """Every method's loss, tiled vs the dense oracle: float32 on CPU (``device``, ``dtype``: elsewhere;
    ``autocast``: both under bf16 autocast, as a GPU step runs them)."""
    import contextlib

    import torch

    x = _exactness_inputs(n, d, device, dtype or torch.float32)
    cases = {**_contrastive_cases(x, n, device), **_gausscse_cases(x, n)}

    def under(fn):
        def run():
            with torch.autocast(device, dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
                return fn()
        return run

    out = {name: _exact(under(lambda: tiled(tile)), under(dense_fn), inputs, rel)
           for name, (tiled, dense_fn, inputs) in cases.items()}
    return {"all": all(v["equal"] for v in out.values()), "n": n, "d": d, "tile": tile, "rel": rel, "methods": out}


def _exactness_inputs(n: int, d: int, device: str, dtype):
    """The losses' inputs, seeded: embeddings (leaves), rows, masks, weights, entity ids, clusters, Gaussians."""
    from types import SimpleNamespace

    import torch

    g = torch.Generator().manual_seed(0)

    def leaf(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=g)).to(device=device, dtype=dtype).requires_grad_()

    x = SimpleNamespace(rows=torch.arange(0, n, 3).to(device))
    x.a, x.p, x.m, x.r = leaf(n, d), leaf(n, d), leaf(n, d), leaf(n, d, scale=0.3)
    x.valid = (torch.rand(n, generator=g) > 0.3).to(device)
    x.weights = (torch.rand(n, generator=g) + 0.5).to(device=device, dtype=dtype)
    x.entity_ids = torch.randint(1, n // 4, (2, n), generator=g).to(device)  # many duplicate entities
    x.clusters = torch.randint(0, 40, (n,), generator=g).to(device)
    x.mus, x.logvars = [leaf(n, d) for _ in range(3)], [leaf(n, d, scale=0.5) for _ in range(3)]
    return x


def _contrastive_cases(x, n: int, device: str) -> dict:
    """name: (tiled loss of a tile, dense oracle, the inputs the gradients are taken of)."""
    import torch

    from tests import dense_losses as dense
    from train.methods.dsbats import dsbats_loss
    from train.methods.ease import entity_loss
    from train.methods.pair_losses import rse_loss, simcse_supervised_loss
    from train.methods.simcse_unsup import simcse_loss

    a, p, m, r, rows, tau = x.a, x.p, x.m, x.r, x.rows, 0.05
    ids, clusters = x.entity_ids, x.clusters
    return {
        "simcse_unsup": (lambda t: simcse_loss(a, p, tau, t), lambda: dense.info_nce(a, p, torch.arange(n, device=device), tau), [a, p]),
        "mnrl": (lambda t: simcse_supervised_loss(a, p, None, tau, tile=t),
                 lambda: dense.simcse_supervised_loss(a, p, None, tau), [a, p]),
        "simcse_sup": (lambda t: simcse_supervised_loss(a, p, m, tau, 1.0, rows=rows, tile=t),
                       lambda: dense.simcse_supervised_loss(a, p, m, tau, 1.0, rows=rows), [a, p, m]),
        "aspectcse": (lambda t: simcse_supervised_loss(a, p, m, tau, tile=t),
                      lambda: dense.simcse_supervised_loss(a, p, m, tau), [a, p, m]),
        "ease_entities": (
            lambda t: entity_loss(a, p, m, ids[0], ids[1], temperature=0.1, hard_negative_weight=1.0, tile=t),
            lambda: dense.entity_loss(a, p, m, ids[0], ids[1], temperature=0.1, hard_negative_weight=1.0),
            [a, p, m]),
        "rse_weighted": (
            lambda t: rse_loss(a, r, p, m, tau, hard_negative_valid=x.valid, weights=x.weights, rows=rows, tile=t),
            lambda: dense.rse_loss(a, r, p, m, tau, hard_negative_valid=x.valid, weights=x.weights, rows=rows),
            [a, r, p, m]),
        "dsbats_other_clusters": (
            lambda t: dsbats_loss(a, p, m, tau, False, p, clusters, clusters, tile=t),
            lambda: dense.dsbats_loss(a, p, m, tau, False, p, clusters[:, None] == clusters[None, :]), [a, p, m]),
        "dsbats_in_denominator": (lambda t: dsbats_loss(a, p, m, tau, True, tile=t),
                                  lambda: dense.dsbats_loss(a, p, m, tau, True), [a, p, m]),
    }


def _gausscse_cases(x, n: int) -> dict:
    """GaussCSE's three forms (per_dim on n/4 rows: its dense oracle holds (n, n, d))."""
    import torch

    from tests import dense_losses as dense
    from train.methods.pair_losses import Gaussian, gausscse_loss

    def gaussians():
        return [Gaussian(mu, torch.exp(lv)) for mu, lv in zip(x.mus, x.logvars)]

    cases = {}
    for form in ("kl_sum", "kl_mean", "per_dim"):
        sub = slice(0, n if form != "per_dim" else n // 4)

        def tiled(t, form=form, sub=sub):
            prem, ent, con = (Gaussian(g.mu[sub], g.var[sub]) for g in gaussians())
            return gausscse_loss(prem, ent, con, temperature=0.05, form=form, tile=t)

        def oracle(form=form, sub=sub):
            prem, ent, con = (Gaussian(g.mu[sub], g.var[sub]) for g in gaussians())
            return dense.gausscse_loss(prem, ent, con, temperature=0.05, form=form)

        cases[f"gausscse_{form}"] = (tiled, oracle, x.mus + x.logvars)
    return cases


PEAK_CHILD = r"""
import sys, time, torch
sys.path.insert(0, {repo!r})
from train.methods.contrastive import info_nce

def status(key):  # kB
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])

n, d, tile = {n}, {d}, {tile}
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) restarts from the current resident set
before = status("VmRSS:")
g = torch.Generator().manual_seed(0)
a = torch.randn(n, d, generator=g).requires_grad_()
c = torch.randn(n, d, generator=g).requires_grad_()
t0 = time.perf_counter()
loss = info_nce(a, c, torch.arange(n), 0.05, tile=tile)
loss.backward()
seconds = time.perf_counter() - t0
peak = status("VmHWM:")
print(before, peak, seconds, float(loss), bool(torch.isfinite(a.grad).all() and torch.isfinite(c.grad).all()))
"""


def peak_memory(n: int, d: int, tile: int) -> dict:
    """One info_nce forward + backward in a fresh process: peak RSS over the RSS before the inputs."""
    child = PEAK_CHILD.format(repo=str(REPO), n=n, d=d, tile=tile)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    if out.returncode != 0:
        raise RuntimeError(f"the memory probe failed:\n{out.stderr[-2000:]}")
    before, peak, seconds, loss, finite = out.stdout.split()
    return {"peak_gb": round((int(peak) - int(before)) / 2**20, 3), "seconds": round(float(seconds), 1),
            "loss": round(float(loss), 4), "gradients_finite": finite == "True", "tile": tile}


def loss_seconds(n: int, d: int, tiles: list[int], repeats: int = 3, device: str = "cpu") -> dict:
    """Forward + backward of info_nce at B = N = n, best of ``repeats``, for each tile (0 = dense). On
    CUDA: bf16 autocast (as training runs it), synchronised, and the peak memory of each."""
    import contextlib

    import torch

    from train.methods.contrastive import info_nce

    cuda = device == "cuda"
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, d, generator=g).to(device).requires_grad_()
    c = torch.randn(n, d, generator=g).to(device).requires_grad_()
    out = {}
    for tile in tiles:
        best = float("inf")
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        for _ in range(repeats):
            a.grad = c.grad = None
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
                loss = info_nce(a, c, torch.arange(n, device=device), 0.05, tile=tile)
            loss.backward()
            if cuda:
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        name = "dense" if tile == 0 else f"tile{tile}"
        out[name] = round(best, 4)
        if cuda:
            out[f"{name}_peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    return out


def loss_figures(smoke: bool = False) -> dict:
    from train.methods.tiled import DEFAULT_LOSS_TILE

    n_big, n_time = (8192, 1024) if smoke else (65536, 4096)
    d = 384
    figures = {"tiled_equals_dense": exactness(n=300 if smoke else 1000, tile=128 if smoke else 384)}
    probe = peak_memory(n_big, d, DEFAULT_LOSS_TILE if not smoke else 1024)
    figures[f"loss_peak_gb_{n_big}x{d}"] = probe["peak_gb"]
    figures[f"loss_probe_{n_big}x{d}"] = probe
    figures[f"dense_loss_gb_{n_big}x{d}"] = round(3 * n_big * n_big * 4 / 2**30, 1)
    for n in (n_time, 2 * n_time):
        tiles = [0, n // 4, n // 2]  # a tile >= n is the dense path
        times = loss_seconds(n, d, tiles)
        figures[f"loss_seconds_{n}"] = times
        figures[f"tiled_vs_dense_time_{n}"] = {k: round(v / times["dense"], 3) for k, v in times.items() if k != "dense"}
    figures["default_loss_tile"] = DEFAULT_LOSS_TILE
    return figures
