"""train/methods/pair_losses.py: supervised SimCSE, GaussCSE and RSE against hand computations (pure torch)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributions as td
import torch.nn.functional as F

from train.methods.contrastive import cos_logits, info_nce
from train.methods.pair_losses import (
    GAUSSCSE_VARIANTS,
    Gaussian,
    GaussianHead,
    RelationEmbedding,
    asymmetric_similarity,
    bounded_logvar,
    gausscse_loss,
    kl_diagonal,
    link_prediction_scores,
    parse_gausscse_variant,
    relation_scores,
    relational_similarity,
    rse_loss,
    simcse_supervised_loss,
    similarity_matrix,
    symmetric_similarity,
)
from train.methods.simcse_unsup import simcse_loss

TAU = 0.05


# ------------------------------------------------------------------ plain-python helpers


def cos(u, v):
    dot = sum(a * b for a, b in zip(u, v))
    return dot / (math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v)))


def add(u, v):
    return [a + b for a, b in zip(u, v)]


def ce(logits, label):
    m = max(logits)
    return -(logits[label] - m - math.log(sum(math.exp(x - m) for x in logits)))


def kl1(mu_a, var_a, mu_b, var_b):
    """KL of 1-d Gaussians."""
    return 0.5 * (math.log(var_b / var_a) + var_a / var_b + (mu_a - mu_b) ** 2 / var_b - 1)


def kl_vec(a, b):
    return sum(kl1(ma, va, mb, vb) for ma, va, mb, vb in zip(a[0], a[1], b[0], b[1]))


def sim_paper(a, b):
    return 1 / (1 + kl_vec(a, b))


def T(x):
    return torch.tensor(x, dtype=torch.float32)


def G(rows):
    """[(mu list, var list), ...] -> Gaussian of (N, d) tensors."""
    return Gaussian(T([r[0] for r in rows]), T([r[1] for r in rows]))


# ------------------------------------------------------------------ SimCSE supervised

A = [[1.0, 0.0], [0.6, 0.8]]
P = [[0.8, 0.6], [0.0, 1.0]]
N = [[-1.0, 0.2], [1.0, 1.0]]


@pytest.mark.parametrize("w", [0.0, 0.7])
def test_simcse_supervised_hand_computed(w):
    expected = 0.0
    for i in range(2):
        logits = [cos(A[i], P[j]) / TAU for j in range(2)]
        logits += [cos(A[i], N[j]) / TAU + (w if j == i else 0.0) for j in range(2)]
        expected += ce(logits, i) / 2
    got = simcse_supervised_loss(T(A), T(P), T(N), TAU, negative_weight=w)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_simcse_supervised_without_negatives_is_info_nce_and_unsup_loss():
    g = torch.Generator().manual_seed(0)
    a, p = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    got = simcse_supervised_loss(a, p, None, TAU)
    assert got.item() == pytest.approx(info_nce(a, p, torch.arange(5), TAU).item(), rel=1e-6)
    assert got.item() == pytest.approx(simcse_loss(a, p, TAU).item(), rel=1e-6)  # no process group: plain
    # the hard-negative weight is irrelevant without hard negatives
    assert simcse_supervised_loss(a, p, None, TAU, negative_weight=3.0).item() == pytest.approx(got.item())


def test_simcse_supervised_weight_is_own_hard_negative_only():
    g = torch.Generator().manual_seed(1)
    a, p, n = (torch.randn(3, 4, generator=g) for _ in range(3))
    bias = torch.zeros(3, 6)
    bias[torch.arange(3), 3 + torch.arange(3)] = 1.5
    ref = F.cross_entropy(cos_logits(a, torch.cat([p, n]), TAU) + bias, torch.arange(3))
    assert simcse_supervised_loss(a, p, n, TAU, 1.5).item() == pytest.approx(ref.item(), rel=1e-6)
    assert simcse_supervised_loss(a, p, n, TAU, 1.5).item() > simcse_supervised_loss(a, p, n, TAU).item()


# ------------------------------------------------------------------ rows: the split of a global batch


def _split_equals_full(fn, n):
    full = fn(None)
    halves = [fn(torch.arange(0, n // 2)), fn(torch.arange(n // 2, n))]
    assert full.item() == pytest.approx(sum(h.item() for h in halves) / 2, rel=1e-5)


def test_rows_split_of_the_global_batch_equals_full_loss():
    g = torch.Generator().manual_seed(2)
    a, p, n, r = (torch.randn(4, 3, generator=g) for _ in range(4))
    _split_equals_full(lambda rows: simcse_supervised_loss(a, p, n, TAU, 0.5, rows=rows), 4)
    _split_equals_full(lambda rows: rse_loss(a, r, p, n, TAU, rows=rows), 4)
    gp, ge, gc = (Gaussian(torch.randn(4, 3, generator=g), torch.rand(4, 3, generator=g) + 0.1) for _ in range(3))
    _split_equals_full(lambda rows: gausscse_loss(gp, ge, gc, rows=rows, temperature=TAU), 4)


# ------------------------------------------------------------------ GaussCSE: KL and similarity


def test_kl_diagonal_matches_torch_distributions():
    g = torch.Generator().manual_seed(3)
    mu_a, mu_b = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    var_a, var_b = torch.rand(3, 4, generator=g) + 0.2, torch.rand(3, 4, generator=g) + 0.2
    na, nb = td.Normal(mu_a, var_a.sqrt()), td.Normal(mu_b, var_b.sqrt())
    per_dim = td.kl_divergence(na, nb)
    full = td.kl_divergence(td.Independent(na, 1), td.Independent(nb, 1))
    torch.testing.assert_close(kl_diagonal(mu_a, var_a, mu_b, var_b, "none"), per_dim)
    torch.testing.assert_close(kl_diagonal(mu_a, var_a, mu_b, var_b), full)
    torch.testing.assert_close(kl_diagonal(mu_a, var_a, mu_b, var_b, "mean"), full / 4)
    # broadcasting (pairwise) and KL(p ‖ p) = 0
    pair = kl_diagonal(mu_a[None], var_a[None], mu_b[:, None], var_b[:, None])
    assert pair.shape == (3, 3)
    assert pair[1, 2].item() == pytest.approx(
        full_kl := td.kl_divergence(
            td.Independent(td.Normal(mu_a[2], var_a[2].sqrt()), 1),
            td.Independent(td.Normal(mu_b[1], var_b[1].sqrt()), 1),
        ).item(),
        rel=1e-5,
    ), full_kl
    assert kl_diagonal(mu_a, var_a, mu_a, var_a).abs().max().item() < 1e-6


def test_similarity_forms_hand_computed():
    a = ([0.5, -1.0], [1.0, 0.5])
    b = ([0.0, 0.0], [2.0, 1.0])
    kls = [kl1(a[0][d], a[1][d], b[0][d], b[1][d]) for d in range(2)]
    ga, gb = G([a]), G([b])
    assert asymmetric_similarity(ga, gb).item() == pytest.approx(1 / (1 + sum(kls)), rel=1e-6)
    assert asymmetric_similarity(ga, gb, "kl_mean").item() == pytest.approx(1 / (1 + sum(kls) / 2), rel=1e-6)
    per_dim = sum(1 / (1 + k) for k in kls) / 2  # the reference code's form
    assert asymmetric_similarity(ga, gb, "per_dim").item() == pytest.approx(per_dim, rel=1e-6)
    rev = [kl1(b[0][d], b[1][d], a[0][d], a[1][d]) for d in range(2)]
    sym = 1 / (1 + (sum(kls) + sum(rev)) / 2)
    assert symmetric_similarity(ga, gb).item() == pytest.approx(sym, rel=1e-6)
    assert symmetric_similarity(gb, ga).item() == pytest.approx(sym, rel=1e-6)


def test_direction_narrow_hypothesis_inside_broad_premise():
    """sim(hyp ‖ prem) > sim(prem ‖ hyp) when the premise is the broader Gaussian (the paper's reading)."""
    prem = G([([0.0, 0.0], [4.0, 4.0])])
    hyp = G([([0.1, 0.0], [0.5, 0.5])])
    assert asymmetric_similarity(hyp, prem).item() > asymmetric_similarity(prem, hyp).item()
    assert prem.log_det().item() > hyp.log_det().item()


def test_similarity_matrix_orientation():
    src = G([([0.0], [1.0]), ([1.0], [2.0]), ([3.0], [0.5])])
    tgt = G([([0.5], [1.5]), ([-1.0], [1.0])])
    m = similarity_matrix(src, tgt)
    assert m.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            s = ([src.mu[j, 0].item()], [src.var[j, 0].item()])
            t = ([tgt.mu[i, 0].item()], [tgt.var[i, 0].item()])
            assert m[i, j].item() == pytest.approx(sim_paper(s, t), rel=1e-5)


# ------------------------------------------------------------------ GaussCSE loss

PREM = [([0.0, 0.5], [2.0, 1.5]), ([1.0, -0.5], [1.0, 3.0])]
ENT = [([0.2, 0.4], [0.5, 0.7]), ([0.8, -0.2], [0.6, 1.0])]
CON = [([-1.0, 1.0], [1.0, 1.0]), ([0.0, 2.0], [0.3, 0.8])]


def _gauss_expected(con: bool, rev: bool) -> float:
    total = 0.0
    for i in range(2):
        logits = [sim_paper(ENT[j], PREM[i]) / TAU for j in range(2)]
        if con:
            logits += [sim_paper(CON[j], PREM[i]) / TAU for j in range(2)]
        if rev:
            logits += [sim_paper(PREM[j], ENT[i]) / TAU for j in range(2)]
        total += ce(logits, i)
    return total / 2


@pytest.mark.parametrize("variant", ["ent", "ent+con", "ent+rev", "ent+con+rev"])
def test_gausscse_loss_variants_hand_computed(variant):
    use_con, use_rev = parse_gausscse_variant(variant)
    expected = _gauss_expected(use_con, use_rev)
    by_args = gausscse_loss(G(PREM), G(ENT), G(CON) if use_con else None, rev=use_rev, temperature=TAU)
    by_name = gausscse_loss(G(PREM), G(ENT), G(CON), variant=variant, temperature=TAU)
    assert by_args.item() == pytest.approx(expected, rel=1e-5)
    assert by_name.item() == pytest.approx(expected, rel=1e-5)


def test_gausscse_variants_differ_as_expected():
    p, e, c = G(PREM), G(ENT), G(CON)
    loss = {
        v: gausscse_loss(p, e, c, variant=v, temperature=TAU).item()
        for v in ("ent", "ent+con", "ent+rev", "ent+con+rev")
    }
    # ent ignores the contradiction inputs entirely
    c2 = Gaussian(c.mu + 5.0, c.var * 3.0)
    assert gausscse_loss(p, e, c2, variant="ent", temperature=TAU).item() == loss["ent"]
    assert gausscse_loss(p, e, c2, variant="ent+rev", temperature=TAU).item() == loss["ent+rev"]
    assert gausscse_loss(p, e, c2, variant="ent+con", temperature=TAU).item() != loss["ent+con"]
    # more negatives in the denominator: strictly larger loss
    assert loss["ent"] < loss["ent+con"] < loss["ent+con+rev"]
    assert loss["ent"] < loss["ent+rev"] < loss["ent+con+rev"]
    # defaults: con given + rev=True is the full loss; reference-code aliases map to the same variants
    assert gausscse_loss(p, e, c, temperature=TAU).item() == pytest.approx(loss["ent+con+rev"])
    assert GAUSSCSE_VARIANTS["pos+rev+neg"] == GAUSSCSE_VARIANTS["ent+con+rev"]
    with pytest.raises(ValueError):
        gausscse_loss(p, e, None, variant="ent+con")
    with pytest.raises(ValueError):
        parse_gausscse_variant("con")


def _train_free_gaussians(variant: str) -> torch.Tensor:
    """Optimise free (μ, log σ²) of 4 premise/hypothesis pairs; returns log-det(prem) - log-det(hyp) per pair."""
    torch.manual_seed(0)
    mu = torch.randn(4, 3)
    mu_p, mu_e = (mu + 0.1 * torch.randn(4, 3)).requires_grad_(), mu.clone().requires_grad_()
    lv_p, lv_e = torch.zeros(4, 3, requires_grad=True), torch.zeros(4, 3, requires_grad=True)
    con = Gaussian(torch.randn(4, 3), torch.ones(4, 3))
    opt = torch.optim.Adam([mu_p, mu_e, lv_p, lv_e], lr=0.05)
    for _ in range(50):
        opt.zero_grad()
        gausscse_loss(
            Gaussian(mu_p, lv_p.exp()), Gaussian(mu_e, lv_e.exp()), con, variant=variant, temperature=TAU
        ).backward()
        opt.step()
    return (lv_p.sum(1) - lv_e.sum(1)).detach()


def test_gausscse_reversed_set_makes_the_premise_broader():
    """With the reversed set the premise's Gaussian grows wider than its hypothesis' (the paper's aim);
    without it nothing breaks the symmetry."""
    assert (_train_free_gaussians("ent+rev") > 1.0).all()
    assert (_train_free_gaussians("ent+con+rev") > 1.0).all()
    assert _train_free_gaussians("ent").abs().max() < 0.5


# ------------------------------------------------------------------ GaussianHead: bounds, bf16, gradients


def test_bounded_logvar_maps_everything_into_the_bounds():
    x = torch.tensor([-float("inf"), -1e30, -3.0, 0.0, 3.0, 1e30, float("inf")])
    for bound in ("tanh", "clamp"):
        lv = bounded_logvar(x, -10.0, 10.0, bound)
        assert torch.isfinite(lv).all() and lv.min() >= -10.0 and lv.max() <= 10.0
        assert lv[3].item() == 0.0
    assert bounded_logvar(torch.tensor([0.0]), -10, 10, "tanh").item() == 0.0
    assert bounded_logvar(torch.tensor([1e-3]), -10, 10, "tanh").item() == pytest.approx(
        1e-3, rel=1e-4
    )  # ≈ identity near 0
    assert torch.isinf(torch.exp(bounded_logvar(torch.tensor([1e30]), -10, 10, "none"))).all()  # why we bound
    with pytest.raises(ValueError):
        bounded_logvar(x, -1, 1, "softplus")


@pytest.mark.parametrize("bound", ["tanh", "clamp"])
def test_gaussian_head_bf16_huge_preactivations_stay_finite(bound):
    torch.manual_seed(0)
    head = GaussianHead(4, "tanh", bound=bound).to(torch.bfloat16)
    with torch.no_grad():
        head.logvar.weight.fill_(1e30)  # pre-activations ~ ±1e30..inf in bf16
        head.logvar.bias.zero_()
    v = torch.tensor([[1.0, 1.0, 1.0, 1.0], [-1e8, -1e8, -1e8, -1e8], [3e38, 0, 0, 0]], dtype=torch.bfloat16)
    g = head(v)
    assert g.mu.dtype == torch.float32 and g.var.dtype == torch.float32
    assert torch.isfinite(g.mu).all() and torch.isfinite(g.var).all()
    assert g.var.min().item() >= math.exp(-10) * 0.999 and g.var.max().item() <= math.exp(10) * 1.001
    loss = gausscse_loss(g, g, g, temperature=TAU)
    assert torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters() if p.grad is not None)


def test_gaussian_head_shapes_modes_and_gradients_flow():
    torch.manual_seed(0)
    for mode in ("linear", "tanh"):
        head = GaussianHead(6, mode, out_dim=3)
        x = torch.randn(4, 6, requires_grad=True)
        g = head(x)
        assert g.mu.shape == g.var.shape == (4, 3) and (g.var > 0).all()
        if mode == "tanh":
            assert g.mu.abs().max() < 1
        loss = gausscse_loss(Gaussian(g.mu[:2], g.var[:2]), Gaussian(g.mu[2:], g.var[2:]), temperature=TAU)
        loss.backward()
        assert x.grad.abs().sum() > 0
        # every weight learns (μ's bias only shifts all means together, which no KL can see)
        assert head.mean.weight.grad.abs().sum() > 0
        assert head.logvar.weight.grad.abs().sum() > 0 and head.logvar.bias.grad.abs().sum() > 0
    with pytest.raises(ValueError):
        GaussianHead(4, "softplus")
    with pytest.raises(ValueError):
        GaussianHead(4, bound="nope")


# ------------------------------------------------------------------ RSE

HI = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
RK = [[0.5, 0.5], [-0.2, 0.1], [0.5, 0.5]]
HJ = [[1.0, 0.4], [0.3, 1.0], [0.9, 1.2]]
HN = [[-1.0, 0.5], [0.7, -0.3], [0.0, 0.0]]


def _rse_expected(hard: bool, valid=(True, True, True), weights=None) -> float:
    losses = []
    for i in range(3):
        u = add(HI[i], RK[i])
        logits = [cos(u, HJ[m]) / TAU for m in range(3)]
        if hard:
            logits += [cos(u, HN[m]) / TAU for m in range(3) if valid[m]]
        losses.append(ce(logits, i))
    w = weights or [1.0, 1.0, 1.0]
    return sum(l * x for l, x in zip(losses, w)) / sum(w)


def test_rse_loss_hand_computed():
    assert rse_loss(T(HI), T(RK), T(HJ), None, TAU).item() == pytest.approx(_rse_expected(False), rel=1e-5)
    # row 2 has no hard negative (a null in the set): its zero vector is masked out of every row
    valid = torch.tensor([True, True, False])
    got = rse_loss(T(HI), T(RK), T(HJ), T(HN), TAU, hard_negative_valid=valid)
    assert got.item() == pytest.approx(_rse_expected(True, (True, True, False)), rel=1e-5)
    got = rse_loss(T(HI), T(RK), T(HJ), T(HN[:2] + [[0.2, 0.1]]), TAU)
    HN[2] = [0.2, 0.1]
    try:
        assert got.item() == pytest.approx(_rse_expected(True), rel=1e-5)
        w = [1.0, 0.5, 2.0]
        got = rse_loss(T(HI), T(RK), T(HJ), T(HN), TAU, weights=T(w))
        assert got.item() == pytest.approx(_rse_expected(True, weights=w), rel=1e-5)
    finally:
        HN[2] = [0.0, 0.0]


def test_rse_zero_relation_is_supervised_simcse():
    g = torch.Generator().manual_seed(4)
    h_i, h_j, h_n = (torch.randn(4, 3, generator=g) for _ in range(3))
    zero = torch.zeros(4, 3)
    assert rse_loss(h_i, zero, h_j, h_n, TAU).item() == pytest.approx(
        simcse_supervised_loss(h_i, h_j, h_n, TAU).item(), rel=1e-6
    )


def test_relation_embedding_shape_param_group_and_gradient():
    torch.manual_seed(0)
    rel = RelationEmbedding(5, 16)
    assert rel.table.shape == (5, 16)
    assert rel(torch.tensor([0, 4, 4])).shape == (3, 16)
    assert 0.005 < rel.table.std().item() < 0.05  # N(0, 0.02)
    (group,) = rel.param_groups()
    assert group["lr"] == 1e-2 and group["weight_decay"] == 0.0
    assert group["params"] == [rel.embedding.weight]
    assert rel.param_groups(lr=3e-3)[0]["lr"] == 3e-3
    opt = torch.optim.AdamW([{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 5e-5}, *rel.param_groups()])
    assert [g["lr"] for g in opt.param_groups] == [5e-5, 1e-2]
    ids = torch.tensor([0, 1, 0])
    h_i = torch.randn(3, 16, requires_grad=True)
    h_j = torch.randn(3, 16, requires_grad=True)
    rse_loss(h_i, rel(ids), h_j, torch.randn(3, 16), TAU).backward()
    grad = rel.embedding.weight.grad
    assert grad[0].abs().sum() > 0 and grad[1].abs().sum() > 0 and grad[2:].abs().sum() == 0
    assert h_i.grad.abs().sum() > 0 and h_j.grad.abs().sum() > 0


def test_relation_scores_and_weighted_similarity_hand_computed():
    h_a = [[1.0, 0.0], [0.2, 0.9]]
    h_b = [[0.5, 0.5], [1.0, -0.3]]
    table = [[0.3, -0.2], [-0.5, 0.4]]
    fwd = [[cos(add(h_a[b], table[k]), h_b[b]) for k in range(2)] for b in range(2)]
    bwd = [[cos(add(h_b[b], table[k]), h_a[b]) for k in range(2)] for b in range(2)]
    got = relation_scores(T(h_a), T(h_b), T(table))
    assert got.shape == (2, 2)
    torch.testing.assert_close(got, T(fwd))
    torch.testing.assert_close(relation_scores(T(h_a), T(h_b), T(table), "backward"), T(bwd))
    torch.testing.assert_close(
        relation_scores(T(h_a), T(h_b), T(table), "max"),
        T([[max(f, b) for f, b in zip(fr, br)] for fr, br in zip(fwd, bwd)]),
    )
    w = [1.0, 0.5]  # the paper's STS weights -> 2/3, 1/3
    s_f = [fwd[b][0] * 2 / 3 + fwd[b][1] / 3 for b in range(2)]
    s_b = [bwd[b][0] * 2 / 3 + bwd[b][1] / 3 for b in range(2)]
    torch.testing.assert_close(relational_similarity(T(h_a), T(h_b), T(table), w, "forward"), T(s_f))
    torch.testing.assert_close(
        relational_similarity(T(h_a), T(h_b), T(table), w), T([max(f, b) for f, b in zip(s_f, s_b)])
    )
    # symmetric in (a, b) with direction="max"
    torch.testing.assert_close(
        relational_similarity(T(h_b), T(h_a), T(table), w), relational_similarity(T(h_a), T(h_b), T(table), w)
    )
    with pytest.raises(ValueError):
        relation_scores(T(h_a), T(h_b), T(table), "both")


def test_link_prediction_scores():
    h, r = T([[1.0, 0.0]]), T([[0.0, 1.0]])
    cands = T([[1.0, 1.0], [1.0, 0.0], [-1.0, -1.0]])
    got = link_prediction_scores(h, r, cands)
    torch.testing.assert_close(got, T([[1.0, cos([1, 1], [1, 0]), -1.0]]))
