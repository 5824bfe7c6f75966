"""Training at scale: cross-worker negatives, GradCache, fault tolerance — for every method.

* N workers x B rows == 1 worker x N*B rows (loss and every parameter gradient), on real
  gloo process groups, plain and with GradCache (the two compose);
* GradCache (dropout on, RNG replayed) == the same chunks encoded with grad, and its
  activation memory falls with the chunk size;
* RSE's relations are saved with the model and its relation table trains at its own lr (a Ray Train
  worker killed mid-run and restarted from its last checkpoint is ``bench/elastic.py``'s (e)).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from train.config import TrainConfig

METHODS = ["simcse_unsup", "ease", "simcse_sup", "gausscse", "rse", "rse.weighted_loss", "aspectcse", "dsbats",
           "dsbats_concat_mlp"]
# entries of METHODS that are another configuration of a method: name -> (method, its option section)
VARIANTS = {"dsbats_concat_mlp": ("dsbats", {"pair_representation": "concat_mlp"}),
            "rse.weighted_loss": ("rse", {"weighted_loss": True})}
WORDS = "the a river company town band book steel wine ships grain paper glass music films old new big small".split()
RELATIONS = ["contradiction", "duplicate_question", "entailment"]
NUM_ENTITIES = 12


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for _ in range(n)]


def numpy_batch(method: str, rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A batch as Ray Data hands it to ``Method.collate`` (numpy columns of the method's set)."""
    rng = np.random.default_rng(seed)
    if method == "simcse_unsup":
        return {"sentence": np.array(_texts(rng, rows), dtype=object)}
    if method == "ease":
        return {
            "sentence": np.array(_texts(rng, rows), dtype=object),
            "positive_entity": rng.integers(1, NUM_ENTITIES, rows),  # duplicates across workers on purpose
            "negative_entity": rng.integers(1, NUM_ENTITIES, rows),
        }
    if method in ("simcse_sup", "gausscse"):
        return {c: np.array(_texts(rng, rows), dtype=object) for c in ("premise", "entailment", "contradiction")}
    if method == "aspectcse":
        return {c: np.array(_texts(rng, rows), dtype=object) for c in ("anchor", "positive", "negative")}
    if method.startswith("dsbats"):
        columns = ("anchor_first", "anchor_second", "positive_first", "positive_second")
        return {c: np.array(_texts(rng, rows), dtype=object) for c in columns}
    negatives = np.array(_texts(rng, rows), dtype=object)
    negatives[::3] = None  # rows without an in-relation hard negative
    return {
        "sentence1": np.array(_texts(rng, rows), dtype=object),
        "relation": np.array([RELATIONS[i % 3] for i in range(rows)], dtype=object),
        "sentence2": np.array(_texts(rng, rows), dtype=object),
        "hard_negative": negatives,
        "weight": rng.uniform(0.2, 2.0, rows).astype(np.float32),  # unequal: each worker's own sum differs
    }


def build(model_dir: str, method: str, dropout: float):
    from train.loop import build_trainee

    method, options = VARIANTS.get(method, (method, {}))
    cfg = TrainConfig.from_dict(
        {"method": method, "model": model_dir, "data": "unused", "pooling": "cls", "dropout": dropout, "max_len": 16,
         method: options}
    )
    torch.manual_seed(0)
    # float64: an untrained tiny BERT embeds every sentence almost alike, so contrastive gradients are
    # differences of near-equal terms; in float32 their rounding would hide a real error
    return build_trainee(cfg, {"num_entities": NUM_ENTITIES, "relations": RELATIONS}).double()


def assert_grads_equal(got: dict, ref: dict, rel: float, what) -> None:
    """Every entry within ``rel`` of the largest gradient entry of the model (float64 rounding);
    a missing gather or a 1/world error is ~50% of the large entries."""
    assert set(got) == set(ref), what
    scale = max(float(r.abs().max()) for r in ref.values())
    for name, r in ref.items():
        err = float((got[name].double() - r).abs().max())
        assert err <= rel * scale, (what, name, err / scale)


def grads_of(module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    from train.tiny_bert import build_tiny_bert

    rng = np.random.default_rng(0)
    folder = build_tiny_bert(
        _texts(rng, 200), tmp_path_factory.mktemp("scale_bert"), vocab_size=200, hidden_size=32,
        num_layers=2, num_heads=2, intermediate_size=64, max_position_embeddings=32,
    )
    # eager attention: SDPA picks another kernel when a batch has no padding (transformers then
    # drops the mask), so 4 rows and 8 rows would round differently; eager computes both alike
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "attn_implementation": "eager"}))
    return str(folder)


# ------------------------------------------------------------------ N workers x B == 1 x N*B

LOCAL_ROWS, WORLD = 4, 2
# (GradCache chunk, loss tile): plain and cached steps, dense loss and tiles of 3 (4 local anchors x 8 candidates)
STEP_KINDS = [(None, 0), (2, 0), (None, 3), (2, 3)]


def single_process_reference(model_dir: str, method: str, chunk_size=None):
    from train.step import forward_backward

    trainee = build(model_dir, method, dropout=0.0)
    batch = trainee.method.collate(numpy_batch(method, LOCAL_ROWS * WORLD), trainee.encoder)
    loss, _ = forward_backward(trainee, trainee, batch, chunk_size=chunk_size)
    return float(loss.detach()), grads_of(trainee)


def _worker(rank: int, world: int, folder: str, model_dir: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from train.dropout_keys import add_row_keys
    from train.step import forward_backward

    dist.init_process_group("gloo", init_method=f"file://{folder}/pg", rank=rank, world_size=world)

    def step(method: str, chunk, tile: int = 0, keyed: bool = False) -> dict:
        """This rank's share of one step over the global batch: the loss averaged over ranks, its gradients."""
        trainee = build(model_dir, method, dropout=0.1 if keyed else 0.0)
        trainee.method.loss_tile = tile
        model = DistributedDataParallel(trainee) if chunk is None else trainee  # as prepare_model does
        full = numpy_batch(method, LOCAL_ROWS * world)
        mine = {k: v[rank * LOCAL_ROWS : (rank + 1) * LOCAL_ROWS] for k, v in full.items()}
        batch = trainee.method.collate(mine, trainee.encoder)
        if keyed:  # dropout masks keyed by the rows' places in the global batch
            batch = add_row_keys(batch, 3, 5, rank * LOCAL_ROWS)
            torch.manual_seed(100 + rank)  # the generator differs per rank: keyed masks must not read it
        loss, _ = forward_backward(model, trainee, batch, chunk_size=chunk)
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        return {"loss": float(mean_loss) / world, "grads": {k: v.tolist() for k, v in grads_of(trainee).items()}}

    try:
        out = {f"{method}/{chunk}/{tile}": step(method, chunk, tile) for method in METHODS for chunk, tile in STEP_KINDS}
        out.update({f"keyed/{method}/{chunk}": step(method, chunk, keyed=True)
                    for method in KEYED_METHODS for chunk in (None, 2)})
        from tests.test_train import gathered_gradient_error

        errors = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(errors, torch.tensor([gathered_gradient_error()], dtype=torch.float64))
        out["gathered_gradient_error"] = [float(e) for e in errors]  # each rank's
        if rank == 0:
            Path(folder, "result.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_worker_steps(tiny_model, tmp_path_factory) -> dict:
    """Every method's loss and gradients on 2 gloo processes x 4 rows, and each process's
    ``gathered_gradient_error`` (tests/test_train.py) (one spawn for all of them)."""
    import torch.multiprocessing as mp

    folder = tmp_path_factory.mktemp("two_workers")
    mp.spawn(_worker, args=(WORLD, str(folder), tiny_model), nprocs=WORLD, join=True)
    return json.loads((folder / "result.json").read_text())


@pytest.mark.parametrize("method", METHODS)
def test_two_workers_equal_one_big_batch_for_every_method(tiny_model, two_worker_steps, method):
    """2 gloo processes x 4 rows give the loss and every parameter gradient of 1 process x 8 rows
    (every embedding a loss uses is gathered with gradient), with and without GradCache, with the
    loss dense and in tiles over the gathered candidates."""
    ref_loss, ref_grads = single_process_reference(tiny_model, method)
    for chunk, tile in STEP_KINDS:
        got = two_worker_steps[f"{method}/{chunk}/{tile}"]
        assert got["loss"] == pytest.approx(ref_loss, rel=1e-12), (method, chunk, tile)
        grads = {k: torch.tensor(v, dtype=torch.float64) for k, v in got["grads"].items()}
        assert_grads_equal(grads, ref_grads, 1e-9, (method, chunk, tile))


KEYED_METHODS = ["simcse_unsup", "simcse_sup"]


@pytest.mark.parametrize("method", KEYED_METHODS)
def test_keyed_dropout_masks_make_two_workers_equal_one_big_batch(tiny_model, two_worker_steps, method):
    """Dropout 0.1 with masks keyed by (seed, step, column, global row) (train.dropout_keys, an elastic
    run's): 2 processes x 4 rows, plain and with GradCache, give 1 process x 8 rows' loss and gradients in
    float64 — a row gets its masks whichever worker and chunk encode it. Another step's keys: other masks."""
    from train.dropout_keys import add_row_keys
    from train.step import forward_backward

    def reference(step: int):
        trainee = build(tiny_model, method, dropout=0.1)
        batch = add_row_keys(trainee.method.collate(numpy_batch(method, LOCAL_ROWS * WORLD), trainee.encoder), 3, step, 0)
        loss, _ = forward_backward(trainee, trainee, batch)
        return float(loss.detach()), grads_of(trainee)

    ref_loss, ref_grads = reference(5)
    for chunk in (None, 2):
        got = two_worker_steps[f"keyed/{method}/{chunk}"]
        assert got["loss"] == pytest.approx(ref_loss, rel=1e-12), (method, chunk)
        assert_grads_equal({k: torch.tensor(v, dtype=torch.float64) for k, v in got["grads"].items()}, ref_grads,
                           1e-9, (method, chunk))
    with pytest.raises(AssertionError):
        assert_grads_equal(reference(6)[1], ref_grads, 1e-2, method)


def test_two_processes_gather_gradient_is_exact(two_worker_steps):
    """2 real gloo processes: gradients through the gathered SimCSE and EASE losses equal the gradient of the
    full-batch loss written from the formulas, without any gather (tests/test_train.py's references).
    (The same code path on 2 Ray Train workers: tests/test_train.py's EASE run on 2 workers.)"""
    errors = two_worker_steps["gathered_gradient_error"]
    assert len(errors) == WORLD and max(errors) < 1e-5, errors


# ------------------------------------------------------------------ GradCache


@pytest.mark.parametrize("method", METHODS)
def test_grad_cache_equals_the_large_batch_with_dropout(tiny_model, method):
    """GradCache (chunks of 3 of 12 rows, dropout 0.1) with the loss in tiles of 5 gives the gradients of
    encoding the same chunks with grad and back-propagating the dense loss once: the replayed RNG
    reproduces every dropout mask, and the tiles the dense loss."""
    from train.batch import cat_rows, slice_rows
    from train.step import forward_backward

    rows, chunk = 12, 3
    trainee = build(tiny_model, method, dropout=0.1)
    batch = trainee.method.collate(numpy_batch(method, rows, seed=1), trainee.encoder)

    torch.manual_seed(123)
    parts = [trainee.method.embed(trainee.encoder, slice_rows(batch, s, s + chunk)) for s in range(0, rows, chunk)]
    ref_loss, _ = trainee.method.loss_from_embeddings(cat_rows(parts), batch)
    ref_loss.backward()
    reference = grads_of(trainee)
    trainee.zero_grad(set_to_none=True)

    torch.manual_seed(123)
    words = trainee.encoder.model.embeddings.word_embeddings.weight
    accumulations = []  # autograd's writes of a dense word-embedding gradient: one per chunk without deferral

    def count_dense_write(param):
        if param.grad is not None:
            accumulations.append(1)

    hook = words.register_post_accumulate_grad_hook(count_dense_write)
    trainee.method.loss_tile = 5
    loss, _ = forward_backward(trainee, trainee, batch, chunk_size=chunk)
    hook.remove()
    assert accumulations == [] and words.grad is not None  # written once, from all chunks' rows
    cached = grads_of(trainee)
    trainee.zero_grad(set_to_none=True)
    assert float(loss) == pytest.approx(float(ref_loss), rel=1e-12)
    assert_grads_equal(cached, reference, 1e-9, method)

    torch.manual_seed(124)  # other masks: other gradients (so the equality above is not vacuous)
    forward_backward(trainee, trainee, batch, chunk_size=chunk)
    other = grads_of(trainee)
    with pytest.raises(AssertionError):
        assert_grads_equal(other, reference, 1e-2, method)


def test_grad_cache_activation_memory_falls_with_chunk_size(tiny_model):
    from train.step import ActivationMeter, forward_backward

    trainee = build(tiny_model, "simcse_sup", dropout=0.1)
    batch = trainee.method.collate(numpy_batch("simcse_sup", 32, seed=2), trainee.encoder)
    peaks = {}
    for chunk in (None, 16, 4):
        trainee.zero_grad(set_to_none=True)
        with ActivationMeter() as meter:
            forward_backward(trainee, trainee, batch, chunk_size=chunk)
        peaks[chunk] = meter.peak
    assert peaks[None] > peaks[16] > peaks[4] > 0, peaks
    assert peaks[4] < 0.35 * peaks[None], peaks


# ------------------------------------------------------------------ fault tolerance


def test_rse_saves_its_relations_and_trains_them_at_their_own_lr(demo_pair_sets, tiny_model, tmp_path):
    """RSE on the demo world's relation triples (288 rows: 12 steps per epoch, crossed), tokenized by Ray
    Data, length-bucketed, in local mode: its relations are saved with the model and the relation table
    trains at its own lr. (A killed worker restarted by Ray Train from its last recorded checkpoint, ending
    where the uninterrupted run ends: bench/elastic.py's (e); a killed run resumed by the same command:
    bench/cloud.py's resume stage.)"""
    from train.methods import load_method_heads
    from setformat.io import read_table
    from train.run import run

    data, _ = demo_pair_sets
    clean = run(TrainConfig.from_dict(dict(
        method="rse", model=tiny_model, data=str(data), batch_size=24, max_len=16, lr=1e-4,
        epochs=2, max_steps=16, checkpoint_every_steps=4, log_every_steps=0, shuffle_buffer=0,
        pretokenize=True, length_bucketing=2, num_workers=0, storage_path=str(tmp_path / "runs"),
        keep_checkpoints=20, run_name="clean")))
    assert clean.metrics["step"] == 16 and math.isfinite(clean.metrics["loss"])
    heads = load_method_heads(clean.model_path)
    relations = sorted(set(read_table(data / "relation_triples", ["relation"])["relation"].to_pylist()))
    assert heads.name == "rse" and heads.relation_names == relations
    assert heads.relation_scores(torch.randn(2, 32), torch.randn(2, 32)).shape == (2, len(relations))
    state = torch.load(Path(clean.checkpoint_path) / "state.pt", map_location="cpu", weights_only=False)
    groups = state["optimizer"]["param_groups"]
    assert [g["initial_lr"] for g in groups] == [pytest.approx(1e-2), pytest.approx(1e-4), pytest.approx(1e-4)]
    assert groups[0]["weight_decay"] == 0.0 and len(groups[0]["params"]) == 1


def test_a_new_encoder_trains_with_dropout(tiny_model):
    """from_pretrained returns a model in eval mode; the Encoder must train (SimCSE's noise is dropout)."""
    trainee = build(tiny_model, "simcse_unsup", dropout=0.1)
    assert trainee.training and trainee.encoder.model.training
    batch = trainee.method.collate(numpy_batch("simcse_unsup", 4), trainee.encoder)
    z = trainee.method.embed(trainee.encoder, batch)
    assert not torch.allclose(z["z1"], z["z2"])  # two dropout views of the same sentences


def test_length_buckets_keep_every_row_once_and_group_lengths():
    from train.batch import length_buckets

    rng = np.random.default_rng(0)
    texts = _texts(rng, 64)
    batches = [{"sentence": np.array(texts[i : i + 8], dtype=object), "row": np.arange(i, i + 8)} for i in range(0, 64, 8)]
    out = list(length_buckets(iter(batches), "sentence", window=4, seed=1))
    assert [len(b["row"]) for b in out] == [8] * 8
    assert sorted(r for b in out for r in b["row"]) == list(range(64))
    spread = lambda bs: np.mean([np.ptp([len(t) for t in b["sentence"]]) for b in bs])
    assert spread(out) < 0.5 * spread(batches)  # similar lengths share a batch
    again = list(length_buckets(iter(batches), "sentence", window=4, seed=1))
    assert all((a["row"] == b["row"]).all() for a, b in zip(out, again))  # seeded


def test_ray_data_tokens_are_cut_to_the_batch_longest_row(tiny_model):
    from train.batch import _tokenize_batch, tokens_of
    from train.encoder import Encoder

    encoder = Encoder(tiny_model, "cls", max_len=16)
    texts = np.array(["steel wine", "the old river town band book", None], dtype=object)
    stored = _tokenize_batch({"sentence": texts.copy()}, tiny_model, 16, ["sentence"])
    assert stored["sentence.input_ids"].shape == (3, 16) and stored["sentence.present"].tolist() == [True, True, False]
    cut = tokens_of(stored, "sentence", encoder)
    direct = tokens_of({"sentence": texts}, "sentence", encoder)
    assert all(torch.equal(cut[k], direct[k]) for k in direct)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_unpadded_forward_equals_the_stock_forward(tiny_model, attention):
    """Real tokens get the stock forward's hidden states and gradients (eval mode: no dropout)."""
    from transformers import AutoModel

    from train.encoder import Encoder
    from train.unpadded import supports_unpadding, unpadded_forward

    encoder = Encoder(tiny_model, "mean", max_len=16)
    model = AutoModel.from_pretrained(tiny_model, attn_implementation=attention).eval()
    assert encoder.unpad and supports_unpadding(model)
    batch = encoder.tokenize(_texts(np.random.default_rng(3), 6))
    real = batch["attention_mask"].bool()
    assert not real.all(), "the batch must hold padding"

    def run(forward):
        model.zero_grad()
        hidden = forward()
        (hidden[real] ** 2).sum().backward()
        return hidden.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    stock, stock_grads = run(lambda: model(**batch).last_hidden_state)
    ours, our_grads = run(lambda: unpadded_forward(model, **batch))
    assert torch.allclose(ours[real], stock[real], atol=1e-6)
    assert (ours[~real] == 0).all()
    assert stock_grads.keys() == our_grads.keys()
    for name, grad in stock_grads.items():
        assert torch.allclose(our_grads[name], grad, atol=1e-5), name


def test_columns_packed_into_one_forward_equal_one_forward_per_column(tiny_model):
    """Several columns of different lengths through one token matrix: the same embeddings and
    gradients (eval mode) as a forward per column; pooling as in ``Encoder.forward``."""
    from train.encoder import Encoder

    rng = np.random.default_rng(4)
    for pooling in ("cls", "mean"):
        encoder = Encoder(tiny_model, pooling, max_len=16).eval()
        columns = [encoder.tokenize(_texts(rng, rows)) for rows in (5, 3, 4)]
        assert len({column["input_ids"].shape[1] for column in columns}) > 1, "columns must differ in length"

        def run(forward):
            encoder.zero_grad()
            embeddings = forward()
            sum((z * torch.arange(1.0, z.shape[1] + 1)).sum() ** 2 for z in embeddings).backward()
            return [z.detach() for z in embeddings], {n: p.grad.clone() for n, p in encoder.named_parameters()
                                                      if p.grad is not None}

        separate, separate_grads = run(lambda: [encoder(**column) for column in columns])
        packed, packed_grads = run(lambda: encoder.forward_columns(columns))
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(packed, separate))
        assert packed_grads.keys() == separate_grads.keys()
        for name, grad in separate_grads.items():
            assert torch.allclose(packed_grads[name], grad, rtol=1e-4, atol=1e-4), (pooling, name)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_cpu_dropout_drops_each_element_with_p_and_replays_under_a_seed(p):
    """The unpadded forward's CPU dropout (four 15-bit lanes per 64-bit draw): each lane drops
    with p rounded to 1/32768, kept values and their gradients are scaled by 1/(1-p), and the
    same seed gives the same masks (what GradCache's replay relies on)."""
    from train.unpadded import _bernoulli_dropout

    drop = round(p * 32768) / 32768
    states = torch.rand(1000, 3001) + 0.5  # no zeros of its own; 3001 columns: lanes do not line up with rows
    torch.manual_seed(7)
    out = _bernoulli_dropout(states.requires_grad_(), p)
    dropped = out.detach() == 0
    tolerance = 5 * (drop * (1 - drop) / (dropped.numel() / 4)) ** 0.5
    for lane in range(4):
        assert abs(dropped.view(-1)[lane::4].float().mean().item() - drop) < tolerance, lane
    kept = ~dropped
    assert torch.allclose(out.detach()[kept], states.detach()[kept] / (1 - drop))
    out.backward(torch.ones_like(out))
    assert torch.equal(states.grad == 0, dropped)
    assert torch.allclose(states.grad[kept], torch.full_like(states.grad[kept], 1 / (1 - drop)))

    torch.manual_seed(7)
    assert torch.equal(_bernoulli_dropout(states.detach(), p), out.detach())
    assert not torch.equal(_bernoulli_dropout(states.detach(), p), out.detach())
    assert (_bernoulli_dropout(states.detach(), 1.0) == 0).all()


def test_a_batch_without_padding_is_packed_without_index_ops_or_mask(tiny_model, monkeypatch):
    """Full-length rows leave nothing to unpad: the packed path reshapes instead of gathering and
    scattering, attends without a mask, and still equals the stock forward (hidden states and gradients)."""
    from transformers import AutoModel

    from train import unpadded
    from train.encoder import Encoder

    encoder = Encoder(tiny_model, "mean", max_len=8)
    model = AutoModel.from_pretrained(tiny_model, attn_implementation="sdpa").eval()
    full = encoder.tokenize(["the old river town band book steel wine ships grain"] * 3)  # cut at max_len
    assert full["attention_mask"].all()
    index_ops, masks = [], []
    attend = unpadded._attend
    monkeypatch.setattr(torch.Tensor, "index_select", lambda *a: index_ops.append(1) or torch.index_select(*a))
    monkeypatch.setattr(unpadded, "_attend", lambda *a: masks.append(a[3]) or attend(*a))

    def run(forward):
        model.zero_grad()
        hidden = forward()
        (hidden**2).sum().backward()
        return hidden.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    stock, stock_grads = run(lambda: model(**full).last_hidden_state)
    ours, our_grads = run(lambda: unpadded.unpadded_forward(model, **full))
    assert index_ops == [] and masks and all(m is None for m in masks)
    assert torch.allclose(ours, stock, atol=1e-5)
    for name, grad in stock_grads.items():
        assert torch.allclose(our_grads[name], grad, atol=1e-5), name


def test_collected_word_gradients_are_bounded_by_the_vocabulary(tiny_model):
    """GradCache's deferred word-embedding gradient sums its rows into one dense buffer once they outnumber
    the vocabulary (a million-pair step must not hold a row per token), and still equals the uncached step."""
    from train import unpadded
    from train.step import forward_backward

    trainee = build(tiny_model, "simcse_sup", dropout=0.0)
    vocabulary = trainee.encoder.model.embeddings.word_embeddings.weight.shape[0]
    batch = trainee.method.collate(numpy_batch("simcse_sup", 64, seed=3), trainee.encoder)
    forward_backward(trainee, trainee, batch)
    reference = grads_of(trainee)
    trainee.zero_grad(set_to_none=True)

    held = []
    collect = unpadded._WordGradients.collect

    def spy(self, ids, rows):
        collect(self, ids, rows)
        held.append((self.count, self.summed is not None))

    unpadded._WordGradients.collect = spy
    try:
        forward_backward(trainee, trainee, batch, chunk_size=8)
    finally:
        unpadded._WordGradients.collect = collect
    assert max(count for count, _ in held) <= vocabulary and any(summed for _, summed in held)
    assert_grads_equal(grads_of(trainee), reference, 1e-9, "bounded word gradients")
