"""train/: losses, gather, config, encoder <-> SentenceTransformer, and real Ray Train runs.

Everything runs on a tiny BERT built from generated sentences and tiny
parquet sets written here with the ingest schemas (the real ingest is tested
elsewhere). Ray runs use the session's `ray_session` (2 CPUs).
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import torch
import torch.nn.functional as F

from setformat.schemas import ENTITIES, ENTITY_PAIRS, SENTENCES, SchemaError
from setformat.io import manifest_path
from train.config import ConfigError, TrainConfig, load_config

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ fixtures: a tiny world

TYPES = {
    "company": [
        "Acme Works",
        "Globex",
        "Initech",
        "Umbrella Labs",
        "Stark Industries",
        "Wayne Enterprises",
        "Hooli",
        "Vandelay Imports",
        "Soylent Foods",
        "Cyberdyne Systems",
    ],
    "country": ["Freedonia", "Sylvania", "Latveria", "Genovia", "Wakanda", "Elbonia", "Ruritania", "Zubrowka"],
    "river": ["Silver River", "Black Creek", "Long Water", "Stone Brook", "Mill Race", "Red Run"],
    "person": ["Ada Stone", "Bo Rivers", "Cy Hale", "Di Marsh", "Ed Fenn", "Flo Reed", "Gus Dane", "Hal Pike"],
}
TEMPLATES = {
    "company": ["{e} makes {w} in {c}", "the company {e} sold {w} to buyers in {c}", "{e} was founded near {c}"],
    "country": [
        "{e} is a country with {w} and old towns",
        "people in {e} trade {w}",
        "the capital of {e} is famous for {w}",
    ],
    "river": ["the {e} flows through {c}", "boats carry {w} along the {e}", "the {e} floods every spring"],
    "person": ["{e} was born in {c}", "{e} wrote a book about {w}", "{e} founded a band in {c}"],
}
WORDS = ["steel", "cheese", "music", "films", "software", "ships", "grain", "paper", "glass", "wine"]


def _entities():
    rows, idx = [], 1
    for typ, titles in TYPES.items():
        for t in titles:
            rows.append(
                {"entity_index": idx, "qid": f"Q{100 + idx}", "title": t, "link_count": 20 + idx, "types": [typ]}
            )
            idx += 1
    return rows


def _pairs(n: int, seed: int = 0):
    rnd = random.Random(seed)
    ents = _entities()
    by_type = {}
    for e in ents:
        by_type.setdefault(e["types"][0], []).append(e)
    countries = TYPES["country"]
    rows = []
    for i in range(n):
        e = rnd.choice(ents)
        typ = e["types"][0]
        neg = rnd.choice([x for x in by_type[typ] if x is not e])
        text = rnd.choice(TEMPLATES[typ]).format(e=e["title"], w=rnd.choice(WORDS), c=rnd.choice(countries))
        rows.append(
            {
                "sentence": text,
                "page_id": 1000 + i,
                "positive_qid": e["qid"],
                "positive_title": e["title"],
                "positive_entity": e["entity_index"],
                "negative_qid": neg["qid"],
                "negative_title": neg["title"],
                "negative_entity": neg["entity_index"],
            }
        )
    return rows


def _write_set(folder: Path, rows: list[dict], schema: pa.Schema, files: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    per = math.ceil(len(rows) / files)
    for k in range(files):
        part = rows[k * per : (k + 1) * per]
        if part:
            pq.write_table(pa.Table.from_pylist(part, schema=schema), folder / f"part-{k:05d}.parquet")
    (folder / "manifest.json").write_text(json.dumps({"rows": len(rows), "schema_version": 1}))
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Tiny BERT + an ingest-style output folder with sentences/, entity_pairs/, entities/ + STS dev + vectors."""
    from train.tiny_bert import build_tiny_bert

    root = tmp_path_factory.mktemp("train_world")
    pairs = _pairs(320)
    sentences = [
        {"sentence": p["sentence"], "page_id": p["page_id"], "title": p["positive_title"], "sentence_index": i}
        for i, p in enumerate(pairs)
    ]
    data = root / "sets"
    _write_set(data / "sentences", sentences, SENTENCES)
    _write_set(data / "entity_pairs", pairs, ENTITY_PAIRS)
    _write_set(data / "entities", _entities(), ENTITIES, files=1)
    model = build_tiny_bert(
        [p["sentence"] for p in pairs],
        root / "tiny_bert",
        vocab_size=400,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    dev = root / "stsb"
    dev.mkdir()
    rnd = random.Random(1)
    with open(dev / "sts-dev.csv", "w") as f:
        for i in range(40):
            a, b = rnd.choice(pairs)["sentence"], rnd.choice(pairs)["sentence"]
            f.write(f"main-news\tdev\t2020\t{i:04d}\t{rnd.uniform(0, 5):.2f}\t{a}\t{b}\n")
    vectors = root / "entity_vectors.txt"
    dim = 16
    ents = _entities()
    with open(vectors, "w") as f:
        f.write(f"{len(ents) // 2 + 2} {dim}\n")
        f.write("steel " + " ".join(["0.5"] * dim) + "\n")  # a word line: ignored (file has ENTITY/ lines)
        f.write("Gus_Dane " + " ".join(["9.0"] * dim) + "\n")  # an unprefixed name: ignored too
        for e in ents[: len(ents) // 2]:
            vec = " ".join(f"{(e['entity_index'] + k) / 100:.4f}" for k in range(dim))
            f.write(f"ENTITY/{e['title'].replace(' ', '_')} {vec}\n")
    return {"root": root, "data": data, "model": str(model), "dev": dev, "vectors": vectors, "vec_dim": dim}


def _cfg(world, tmp_path, **kw) -> TrainConfig:
    base = dict(
        model=world["model"],
        data=str(world["data"]),
        batch_size=16,
        max_len=32,
        lr=1e-4,
        storage_path=str(tmp_path / "runs"),
        checkpoint_every_steps=2,
        log_every_steps=0,
        shuffle_buffer=64,
        num_workers=1,
    )
    base.update(kw)
    return TrainConfig.from_dict(base, "test")


# ------------------------------------------------------------------ reference losses, written from the formulas


def _info_nce_reference(z1, z2, tau):
    """SimCSE-unsup: mean_i -log e^{cos(z1_i,z2_i)/τ} / Σ_j e^{cos(z1_i,z2_j)/τ}, one anchor at a time."""
    losses = []
    for i in range(z1.shape[0]):
        logits = torch.stack([F.cosine_similarity(z1[i], z2[j], dim=0) / tau for j in range(z2.shape[0])])
        losses.append(-torch.log_softmax(logits, 0)[i])
    return torch.stack(losses).mean()


def _ease_reference(z, pos, neg, pos_ids, neg_ids, tau, w, mask_duplicates=True):
    """EASE entity loss from the paper's formula (+ duplicate-entity masking), one anchor at a time."""
    losses = []
    n = z.shape[0]
    for i in range(n):
        terms = []
        for j in range(n):
            if mask_duplicates and j != i and pos_ids[j] == pos_ids[i]:
                continue
            terms.append((j == i, F.cosine_similarity(z[i], pos[j], dim=0) / tau))
        for j in range(n):
            if mask_duplicates and neg_ids[j] == pos_ids[i]:
                continue
            terms.append((False, F.cosine_similarity(z[i], neg[j], dim=0) / tau + (w if j == i else 0.0)))
        logits = torch.stack([t for _, t in terms])
        target = [k for k, (is_pos, _) in enumerate(terms) if is_pos][0]
        losses.append(-torch.log_softmax(logits, 0)[target])
    return torch.stack(losses).mean()


# ------------------------------------------------------------------ losses (no Ray)


def test_info_nce_matches_hand_computation():
    from train.methods.contrastive import info_nce

    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    c = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    tau = 0.5
    # cosines: row0 [1, 1/√2], row1 [0, 1/√2]; labels 0, 1
    s = 1 / math.sqrt(2)
    l0 = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(s / tau)))
    l1 = -math.log(math.exp(s / tau) / (math.exp(0) + math.exp(s / tau)))
    got = info_nce(a, c, torch.tensor([0, 1]), tau)
    assert got.item() == pytest.approx((l0 + l1) / 2, rel=1e-5)


def test_simcse_loss_identical_views_beat_random():
    from train.methods.simcse_unsup import simcse_loss

    torch.manual_seed(0)
    z1 = torch.randn(8, 16)
    same = simcse_loss(z1, z1.clone(), 0.05)
    rand = simcse_loss(z1, torch.randn(8, 16), 0.05)
    assert same.item() < rand.item()
    assert same.item() < 0.1  # identical views with τ=0.05: the positive dominates
    assert rand.item() > math.log(8) * 0.5


def test_ease_hard_negative_weight_is_added_to_own_logit_only():
    from tests.dense_losses import entity_logits

    torch.manual_seed(0)
    z, pos, neg = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    pos_ids, neg_ids = torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8])
    kw = dict(temperature=0.1, mask_duplicates=True)
    l0, labels = entity_logits(z, pos, neg, pos_ids, neg_ids, hard_negative_weight=0.0, **kw)
    l1, _ = entity_logits(z, pos, neg, pos_ids, neg_ids, hard_negative_weight=1.5, **kw)
    diff = l1 - l0
    expected = torch.zeros(4, 8)
    expected[torch.arange(4), 4 + torch.arange(4)] = 1.5
    assert torch.allclose(diff, expected)
    assert labels.tolist() == [0, 1, 2, 3]
    # the positive block is cos/τ_e: τ_e divides
    assert torch.allclose(l0[:, :4], F.normalize(z) @ F.normalize(pos).T / 0.1, atol=1e-5)
    # a larger hard-negative weight makes the loss larger
    assert F.cross_entropy(l1, labels) > F.cross_entropy(l0, labels)


def test_ease_masks_duplicate_entities():
    from tests.dense_losses import entity_logits
    from train.methods.ease import entity_loss

    torch.manual_seed(0)
    z, pos, neg = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    pos_ids = torch.tensor([1, 2, 1, 3])  # rows 0 and 2 share their positive entity
    neg_ids = torch.tensor([5, 1, 6, 7])  # row 1's hard negative is row 0's positive
    logits, _ = entity_logits(z, pos, neg, pos_ids, neg_ids, temperature=0.05, hard_negative_weight=1.0)
    inf = torch.isinf(logits)
    assert inf[0, 2] and inf[2, 0]  # same positive entity, other row: a false negative
    assert not inf[0, 0] and not inf[2, 2]  # own positive kept
    assert inf[0, 4 + 1] and inf[2, 4 + 1]  # entity 1 as row 1's hard negative: masked for anchors 0 and 2
    assert inf.sum() == 4
    kw = dict(temperature=0.05, hard_negative_weight=1.0)
    masked = entity_loss(z, pos, neg, pos_ids, neg_ids, mask_duplicates=True, **kw)
    unmasked = entity_loss(z, pos, neg, pos_ids, neg_ids, mask_duplicates=False, **kw)
    assert torch.isfinite(masked) and masked.item() != pytest.approx(unmasked.item())


@pytest.mark.parametrize("mask", [True, False])
def test_losses_match_the_formulas(mask):
    from train.methods.ease import entity_loss
    from train.methods.simcse_unsup import simcse_loss

    torch.manual_seed(1)
    z1, z2, pos, neg = (torch.randn(6, 8) for _ in range(4))
    pos_ids, neg_ids = torch.tensor([1, 2, 3, 1, 4, 5]), torch.tensor([6, 7, 8, 9, 2, 10])
    assert simcse_loss(z1, z2, 0.05).item() == pytest.approx(_info_nce_reference(z1, z2, 0.05).item(), rel=1e-5)
    got = entity_loss(z1, pos, neg, pos_ids, neg_ids, temperature=0.1, hard_negative_weight=0.7, mask_duplicates=mask)
    want = _ease_reference(z1, pos, neg, pos_ids, neg_ids, 0.1, 0.7, mask_duplicates=mask)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)


def test_gathered_loss_world_size_1_equals_plain(tmp_path):
    """Through a real (1-process gloo) group, the gathered loss and its gradient equal the plain loss."""
    import torch.distributed as dist

    from train.distributed import world
    from train.methods.contrastive import info_nce
    from train.methods.ease import entity_loss
    from train.methods.simcse_unsup import simcse_loss

    torch.manual_seed(0)
    z1, z2 = torch.randn(6, 8, requires_grad=True), torch.randn(6, 8, requires_grad=True)
    plain = info_nce(z1, z2, torch.arange(6), 0.05)
    plain_grad = torch.autograd.grad(plain, [z1, z2])
    assert world() == (0, 1)
    no_group = simcse_loss(z1, z2, 0.05)
    assert no_group.item() == pytest.approx(plain.item(), rel=1e-6)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        assert world() == (0, 1)
        gathered = simcse_loss(z1, z2, 0.05)
        grads = torch.autograd.grad(gathered, [z1, z2])
        assert gathered.item() == pytest.approx(plain.item(), rel=1e-6)
        for g, p in zip(grads, plain_grad):
            assert torch.allclose(g, p, atol=1e-6)
        pos, neg = torch.randn(6, 8), torch.randn(6, 8)
        ids = torch.arange(1, 7)
        kw = dict(temperature=0.05, hard_negative_weight=1.0)
        e_pg = entity_loss(z1, pos, neg, ids, ids + 10, **kw)
    finally:
        dist.destroy_process_group()
    e_plain = entity_loss(z1, pos, neg, ids, ids + 10, **kw)
    assert e_pg.item() == pytest.approx(e_plain.item(), rel=1e-6)


# ------------------------------------------------------------------ config


def test_config_unknown_and_wrong_keys(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: simcse_unsup\nbatchsize: 64\n")
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    msg = str(e.value)
    assert "batchsize" in msg and str(bad) in msg and "batch_size" in msg  # names key, file, valid keys

    nested = tmp_path / "nested.yaml"
    nested.write_text("method: ease\nease:\n  hard_negative_wieght: 1.0\n")
    with pytest.raises(ConfigError, match=r"ease\.hard_negative_wieght.*hard_negative_weight"):
        load_config(nested)

    typed = tmp_path / "typed.yaml"
    typed.write_text("batch_size: many\n")
    with pytest.raises(ConfigError, match="batch_size.*int"):
        load_config(typed)

    with pytest.raises(ConfigError, match="ease.nope"):
        load_config(REPO / "configs" / "ease.yaml", ["ease.nope=1"])
    with pytest.raises(ConfigError, match="num_workers=3"):
        load_config(REPO / "configs" / "simcse_unsup.yaml", ["num_workers=3", "data=x"]).validate()


def test_shipped_configs_and_overrides():
    ease = load_config(REPO / "configs" / "ease.yaml", ["ease.hard_negative_weight=0.5", "lr=1e-5", "max_steps=7"])
    assert ease.method == "ease" and ease.ease.hard_negative_weight == 0.5 and ease.lr == 1e-5 and ease.max_steps == 7
    assert TrainConfig.from_dict(ease.to_dict()).to_dict() == ease.to_dict()


def test_cli_help():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "train", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--config" in out.stdout and "--num-workers" in out.stdout


# ------------------------------------------------------------------ encoder <-> SentenceTransformer


@pytest.mark.parametrize("pooling", ["cls", "cls_mlp", "mean"])
def test_sentence_transformer_folder_reproduces_encoder(world, tmp_path, pooling):
    from sentence_transformers import SentenceTransformer

    from train.encoder import Encoder

    torch.manual_seed(0)
    enc = Encoder(world["model"], pooling=pooling, max_len=16)
    texts = ["the Globex company sold steel", "Ada Stone was born in Genovia " * 6, "rivers"]
    ours = enc.encode(texts)
    enc.save_sentence_transformer(tmp_path / "st")
    theirs = SentenceTransformer(str(tmp_path / "st"), device="cpu").encode(texts, convert_to_tensor=True)
    assert ours.shape == theirs.shape == (3, 32)
    assert torch.allclose(ours, theirs.float(), atol=1e-5)
    # train-time embedding differs from inference only for cls_mlp
    enc.train()
    inputs = enc.tokenize(texts, max_length=enc.read_len)  # as encode reads them (training cuts at 16)
    enc.eval()
    train_time = enc(**inputs, inference=False)
    assert torch.allclose(train_time, ours, atol=1e-5) == (pooling != "cls_mlp")


def test_a_normalizing_sentence_transformers_base_keeps_its_normalize_module(world, tmp_path):
    """Issue 22: fine-tuning all-MiniLM-L6-v2 (Transformer, Pooling, Normalize) dropped Normalize. A base
    whose modules end in Normalize gives unit vectors at train and inference time and is saved with it."""
    import json

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    from train.encoder import Encoder, base_normalizes

    base = tmp_path / "st_base"
    SentenceTransformer(modules=[Transformer(world["model"], max_seq_length=16), Pooling(32, "mean"), Normalize()],
                        device="cpu").save(str(base))
    assert base_normalizes(str(base)) and not base_normalizes(world["model"])
    torch.manual_seed(0)
    enc = Encoder(str(base), pooling="mean", max_len=16)
    texts = ["the Globex company sold steel", "rivers"]
    enc.train()
    assert torch.allclose(enc(**enc.tokenize(texts)).norm(dim=-1), torch.ones(2), atol=1e-5)
    ours = enc.encode(texts)
    enc.save_sentence_transformer(tmp_path / "tuned")
    types = [m["type"].rsplit(".", 1)[-1] for m in json.loads((tmp_path / "tuned" / "modules.json").read_text())]
    assert types == ["Transformer", "Pooling", "Normalize"]
    theirs = SentenceTransformer(str(tmp_path / "tuned"), device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(ours, theirs.float(), atol=1e-5)
    assert torch.allclose(Encoder(str(tmp_path / "tuned"), pooling="mean", max_len=16).encode(texts), ours, atol=1e-5)


def test_entity_vectors_initialise_the_table(world):
    from train.methods.ease import EASE

    opts = EASE.Options(entity_dim=world["vec_dim"], entity_vectors=str(world["vectors"]))
    m = EASE(opts, hidden_size=32, temperature=0.05, data_info={"num_entities": len(_entities()) + 1})
    m.init_pretrained({"entities": str(world["data"] / "entities")})
    w = m.entities.embedding.weight
    ents = _entities()
    first = ents[0]  # "Acme Works": in the file as ENTITY/Acme_Works
    expect = torch.tensor([(first["entity_index"] + k) / 100 for k in range(world["vec_dim"])])
    assert torch.allclose(w[first["entity_index"]], expect)
    gus = next(e for e in ents if e["title"] == "Gus Dane")  # only an unprefixed line: not used
    assert w[gus["entity_index"]].abs().max() <= 0.05 + 1e-6
    missing = ents[-1]
    assert w[missing["entity_index"]].abs().max() <= 0.05 + 1e-6 and w[missing["entity_index"]].abs().sum() > 0
    assert w[0].abs().sum() == 0


# ------------------------------------------------------------------ bad input stops before Ray


def test_missing_column_fails_before_any_worker(world, tmp_path, monkeypatch):
    import ray.data

    import train.ray_env as ray_env
    import train.run as run_mod

    broken = tmp_path / "broken"
    rows = [{k: v for k, v in r.items() if k != "negative_entity"} for r in _pairs(40)]
    schema = pa.schema([f for f in ENTITY_PAIRS if f.name != "negative_entity"])
    _write_set(broken / "entity_pairs", rows, schema)
    _write_set(broken / "entities", _entities(), ENTITIES, files=1)

    def boom(*a, **k):
        raise AssertionError("Ray was reached before the schema check")

    monkeypatch.setattr(ray_env, "ensure_ray", boom)
    monkeypatch.setattr(ray.data, "read_parquet", boom)
    cfg = _cfg(world, tmp_path, method="ease", data=str(broken))
    with pytest.raises(SchemaError, match=r"entity_pairs.*negative_entity"):
        run_mod.build_trainer(cfg)
    with pytest.raises(ConfigError, match="model"):
        run_mod.build_trainer(_cfg(world, tmp_path, model=str(tmp_path / "no-such-model")))


# ------------------------------------------------------------------ real Ray Train runs


def _st_matches_checkpoint(model_path: str, checkpoint_path: str, world, pooling: str) -> None:
    """The final SentenceTransformer folder gives the embeddings of the encoder restored from state.pt."""
    from sentence_transformers import SentenceTransformer

    from train.encoder import Encoder

    state = torch.load(Path(checkpoint_path) / "state.pt", map_location="cpu", weights_only=False)
    enc = Encoder(world["model"], pooling=pooling, max_len=32)
    enc.load_state_dict({k[len("encoder.") :]: v for k, v in state["model"].items() if k.startswith("encoder.")})
    texts = ["Initech makes paper in Latveria", "the Silver River floods every spring", "Hal Pike wrote a book"]
    ours = enc.encode(texts)
    theirs = SentenceTransformer(model_path, device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(ours, theirs.float(), atol=1e-5)


def test_simcse_end_to_end_resume_and_load(ray_session, world, tmp_path):
    """SimCSE: in-loop dev selection, checkpoints, resume, final model, TensorBoard across both runs. Both runs
    are in local mode: a Ray Train worker group's start costs ~20 s on 2 cores. A resume on another number of
    workers (local mode -> 2 Ray Train workers, DDP, GradCache) is ``ease_two_workers``'s; a one-worker Ray
    Train run is tests/test_toy_method.py's and the CLI's in tests/test_quiet_logs.py."""
    from train.run import run

    cfg = _cfg(
        world,
        tmp_path,
        method="simcse_unsup",
        run_name="simcse",
        max_steps=3,
        dev_data=str(world["dev"]),
    )
    t0 = time.time()
    first = run(cfg.with_overrides(["num_workers=0"]))
    assert math.isfinite(first.metrics["loss"]) and "dev_spearman" in first.metrics
    assert first.metrics["start_step"] == 0
    run_dir = tmp_path / "runs" / "simcse"
    steps = sorted(p.name for p in run_dir.glob("step-*"))
    assert steps == ["step-0000002", "step-0000003"]
    assert (Path(first.model_path) / "modules.json").is_file()
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["selected_by"] == "dev_spearman" and summary["last_metrics"]["step"] == 3

    # same storage + name: resumes from step 3
    second = run(cfg.with_overrides(["max_steps=5", "num_workers=0"]))
    summary = json.loads((run_dir / "train_summary.json").read_text())
    last = summary["last_metrics"]
    assert last["start_step"] == 3 and last["step"] == 5 and last["world_size"] == 1
    assert summary["selected_by"] == "dev_spearman"
    assert math.isfinite(last["loss"])
    _st_matches_checkpoint(second.model_path, second.checkpoint_path, world, "cls_mlp")
    # TensorBoard: both runs' reports in the run folder, read back with tensorboard's own loader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/examples_per_s", "train/grad_norm", "dev/dev_spearman"} <= scalars
    loss = {e.step: e.value for e in events.Scalars("train/loss")}
    assert sorted(loss) == [2, 3, 4, 5] and loss[5] == pytest.approx(last["loss"], rel=1e-6)
    dev = {e.step: e.value for e in events.Scalars("dev/dev_spearman")}
    assert dev[5] == pytest.approx(last["dev_spearman"], rel=1e-6)
    print(f"simcse two runs: {time.time() - t0:.1f}s")


@pytest.fixture(scope="module")
def ease_local(ray_session, world, tmp_path_factory):
    """EASE in local mode (num_workers=0: Ray Train's local mode, no process group) with bf16 autocast on CPU,
    3 steps, its entity table from the vectors file; what its run folder held at its end (``ease_two_workers``
    resumes it)."""
    from train.run import run

    root = tmp_path_factory.mktemp("ease")
    cfg = _cfg(
        world,
        root,
        method="ease",
        run_name="ease",
        max_steps=3,
        pooling="cls",
        dev_data=str(world["dev"]),
        ease={"entity_dim": world["vec_dim"], "entity_vectors": str(world["vectors"])},
    )
    out = run(cfg.with_overrides(["num_workers=0", "mixed_precision=bf16"]))
    run_dir = root / "runs" / "ease"
    return {
        "cfg": cfg,
        "out": out,
        "run_dir": run_dir,
        "steps": sorted(p.name for p in run_dir.glob("step-*")),
        "model_saved": (Path(out.model_path) / "modules.json").is_file(),
        "card": (Path(out.model_path) / "README.md").read_text(),
    }


@pytest.fixture(scope="module")
def ease_two_workers(ease_local):
    """``ease_local``'s run resumed to step 5 on 2 Ray Train workers with GradCache (chunks of 3), in float32:
    (outcome, seconds). Workers, GradCache and mixed precision are resume-free (train.run_key)."""
    from train.run import run

    t0 = time.time()
    # only 2 CPUs: two 1-CPU workers would leave none for Ray Data's read tasks, so 0.5 CPU each
    result = run(ease_local["cfg"].with_overrides(
        ["max_steps=5", "num_workers=2", "cpus_per_worker=0.5", "chunk_size=3", "mixed_precision=none"]))
    return result, time.time() - t0


def test_ease_on_two_workers_with_grad_cache(ease_two_workers, world):
    """EASE on 2 workers with GradCache (gloo; sentence AND entity embeddings gathered; gradients
    averaged by train.step.sync_gradients), resumed from a local-mode checkpoint; its entity table is saved
    with the model."""
    from train.methods import load_method_heads

    result, seconds = ease_two_workers
    assert seconds < 150, "2-worker run took too long (Ray Data starved of CPUs?)"
    last = json.loads((Path(result.checkpoint_path).parent / "step-0000005" / "metrics.json").read_text())
    assert last["start_step"] == 3 and last["step"] == 5 and last["world_size"] == 2
    # the model is the kept checkpoint with the best dev score, of either run
    kept = [json.loads(p.read_text()) for p in Path(result.checkpoint_path).parent.glob("step-*/metrics.json")]
    best = max(kept, key=lambda m: m["dev_spearman"])
    assert (result.metrics["step"], result.metrics["world_size"]) == (best["step"], best["world_size"])
    assert math.isfinite(last["loss"]) and math.isfinite(last["loss_entity"])
    heads = load_method_heads(result.model_path)
    assert heads is not None and heads.name == "ease"
    assert heads.entities.embedding.weight.shape == (len(_entities()) + 1, world["vec_dim"])
    state = torch.load(Path(result.checkpoint_path) / "state.pt", map_location="cpu", weights_only=False)
    assert torch.equal(heads.entities.embedding.weight, state["model"]["method.entities.embedding.weight"])
    assert heads.embed_entities(torch.tensor([1, 2])).shape == (2, 32)
    _st_matches_checkpoint(result.model_path, result.checkpoint_path, world, "cls")


def gathered_gradient_error() -> float:
    """On each process of a gloo group of 2 (tests/test_train_scale.py's spawn): the largest difference between
    this worker's gradients through the gathered SimCSE + EASE losses and its share of the gradient of the
    full-batch loss written from the formulas (``_info_nce_reference``, ``_ease_reference``), without any gather."""
    from train.distributed import world
    from train.methods.ease import entity_loss
    from train.methods.simcse_unsup import simcse_loss

    rank, size = world()
    b = 3
    torch.manual_seed(0)  # the same global tensors on every worker
    z1, z2, pos, neg = (torch.randn(size * b, 8) for _ in range(4))
    pos_ids = torch.tensor([1, 2, 3, 1, 4, 5])[: size * b]  # a duplicate entity across workers
    neg_ids = torch.tensor([6, 7, 8, 9, 2, 10])[: size * b]
    sl = slice(rank * b, (rank + 1) * b)
    kw = dict(temperature=0.05, hard_negative_weight=1.0)

    def full(z1, z2, pos, neg):  # the loss over the global batch, written without any gather
        return _info_nce_reference(z1, z2, 0.05) + _ease_reference(z1, pos, neg, pos_ids, neg_ids, 0.05, 1.0)

    leaves = [t.clone().requires_grad_() for t in (z1, z2, pos, neg)]
    expected = torch.autograd.grad(full(*leaves), leaves)
    local = [t[sl].clone().requires_grad_() for t in (z1, z2, pos, neg)]
    loss = simcse_loss(local[0], local[1], 0.05) + entity_loss(
        local[0], local[2], local[3], pos_ids[sl], neg_ids[sl], **kw
    )
    grads = torch.autograd.grad(loss, local)
    # DDP averages gradients over workers: grad/size is this worker's share of the full-batch gradient
    return max(float((g / size - e[sl]).abs().max()) for g, e in zip(grads, expected))


def test_local_mode_bf16_run(ease_local, world):
    """num_workers=0 (Ray Train local mode: no process group) with bf16 autocast on CPU (``ease_local``)."""
    out, run_dir = ease_local["out"], ease_local["run_dir"]
    assert math.isfinite(out.metrics["loss"]) and "dev_spearman" in out.metrics
    assert out.metrics["start_step"] == 0 and out.metrics["step"] in (2, 3)
    assert ease_local["steps"] == ["step-0000002", "step-0000003"]
    assert Path(out.checkpoint_path).parent == run_dir and ease_local["model_saved"]
    # the model card says what the model is (issue 22): base, method, sets with manifest checksums, dev metric
    import hashlib

    card = ease_local["card"]
    manifest = Path(manifest_path(world["data"] / "entity_pairs"))  # the fixture writes a legacy manifest.json
    assert "## Training (structcse)" in card and f"`{world['model']}`" in card and "EASE (Nishikawa" in card
    assert hashlib.sha256(manifest.read_bytes()).hexdigest()[:16] in card
    assert f"`dev_spearman` = {out.metrics['dev_spearman']:.4f}" in card


def test_same_seed_gives_the_same_weights(ray_session, world, tmp_path):
    """Deterministic given a seed: a one-worker run reads the set in file order (Ray Data's
    preserve_order), so two runs over an 8-file set end with identical weights."""
    from train.run import run

    data = tmp_path / "sets"
    rows = [r for f in sorted((Path(world["data"]) / "sentences").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    _write_set(data / "sentences", rows, SENTENCES, files=8)
    states = []
    for k in range(2):
        out = run(_cfg(world, tmp_path, data=str(data), method="simcse_unsup", run_name=f"seeded-{k}", num_workers=0,
                       max_steps=4, checkpoint_every_steps=4))
        states.append(torch.load(Path(out.checkpoint_path) / "state.pt", map_location="cpu", weights_only=False)["model"])
    assert states[0].keys() == states[1].keys()
    assert [k for k in states[0] if not torch.equal(states[0][k], states[1][k])] == []


# The configs' values from their papers: tests/test_papers_values.py.


def test_a_config_can_be_set_away_from_its_paper_and_bad_values_are_named():
    gauss = load_config(REPO / "configs" / "gausscse.yaml", ["gausscse.variant=ent+rev"])
    assert gauss.gausscse.variant == "ent+rev" and gauss.pooling == "cls_raw" and gauss.max_len == 64
    with pytest.raises(ConfigError, match="gausscse.variant"):
        load_config(REPO / "configs" / "gausscse.yaml", ["gausscse.variant=ent+foo", "data=x"]).validate()


def test_other_ray_instances_are_named_before_a_second_local_ray_starts(ray_session, monkeypatch, project_log):
    """For a new driver the test session's Ray is another instance on this machine: the check
    names its GCS address and how to avoid the clash; with RAY_ADDRESS set it stays quiet."""
    from infra.ray_local import warn_if_other_ray_instances

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    own = ray_session.get_runtime_context().gcs_address
    assert own in warn_if_other_ray_instances({"address": "local"})
    said = project_log.lines
    assert len(said) == 1 and own in said[0] and "RAY_ADDRESS" in said[0]
    monkeypatch.setenv("RAY_ADDRESS", own)
    project_log.clear()
    assert warn_if_other_ray_instances({"address": "local"}) == [] and project_log.lines == []


def test_workers_that_would_starve_ray_data_are_refused_with_the_setting_that_fits(tmp_path):
    """On one machine, N workers x cpus_per_worker must leave Ray Data a CPU (issue 22: --num-workers 2
    on 2 CPUs waited forever); the message names the setting that fits."""
    from train.config import ConfigError, TrainConfig
    from train.ray_env import check_worker_cpus

    cfg = TrainConfig.from_dict({"method": "simcse_unsup", "model": "m", "data": str(tmp_path), "num_workers": 2})
    with pytest.raises(ConfigError, match=r"2 worker\(s\) x 1 CPU take 2 of this machine's 2 CPUs.*cpus_per_worker=0\.5"):
        check_worker_cpus(cfg, 2.0)
    check_worker_cpus(cfg.with_overrides(["cpus_per_worker=0.5"]), 2.0)
    check_worker_cpus(cfg, 8.0)
    with pytest.raises(ConfigError, match="--num-workers 0"):
        check_worker_cpus(cfg, 1.0)
    check_worker_cpus(cfg.with_overrides(["num_workers=0"]), 1.0)  # local mode: no worker actors


def test_train_cli_help_lists_methods_and_takes_max_steps(capsys):
    from train.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    for method in ("simcse_unsup", "simcse_sup", "ease", "gausscse", "rse", "aspectcse", "dsbats"):
        assert f"  {method} " in out and "configs/dsbats_other_clusters.yaml" in out
    assert build_parser().parse_args(["--config", "c.yaml", "--max-steps", "7"]).max_steps == 7


def test_progress_lines_carry_elapsed_time_and_eta():
    from train.reporting import Eta, _clock

    assert (_clock(5), _clock(75), _clock(3725), _clock(float("nan"))) == ("0:05", "1:15", "1:02:05", "?")
    eta = Eta(start_step=40, total_steps=100)  # a run resumed at step 40
    eta.t0 -= 30.0  # 30 s ago
    assert eta.line(40) == "elapsed 0:30 eta ?"
    assert eta.line(50) == "elapsed 0:30 eta 2:30"  # 10 steps in 30 s, 50 to go


def test_a_hub_model_on_an_offline_machine_fails_at_once_saying_to_pass_a_local_path(monkeypatch, tmp_path):
    import socket
    import time as time_mod

    from huggingface_hub import constants

    from train.config import ConfigError
    from train.plan import check_hub_reachable

    check_hub_reachable(str(tmp_path))  # a local folder: nothing to reach
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError, match=r"'org/no-such-model' is not a local folder .*HF_HUB_OFFLINE.*--model /path"):
        check_hub_reachable("org/no-such-model")
    # online mode against an endpoint where nothing listens (a closed loopback port): refused at once
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    started = time_mod.monotonic()
    with pytest.raises(ConfigError, match=rf"127\.0\.0\.1:{port} cannot be reached"):
        check_hub_reachable("org/no-such-model")
    assert time_mod.monotonic() - started < 5
