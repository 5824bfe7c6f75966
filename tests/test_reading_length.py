"""A model trained at ``max_len`` reads whole sentences afterwards: the folder it saves keeps the base
encoder's own limit, and every way of loading it (``structcse.load``, ``SentenceTransformer(path)``,
``Encoder.encode``) tells a long text from its prefix."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    from train.tiny_bert import build_tiny_bert

    words = [f"word{i}" for i in range(200)]
    texts = [" ".join(words[i : i + 60]) for i in range(0, 140, 7)]
    return build_tiny_bert(texts, tmp_path_factory.mktemp("base"))


def _long_and_prefix(encoder) -> tuple[str, str]:
    long_text = " ".join(f"word{i}" for i in range(60))
    ids = encoder.tokenizer(long_text, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 60
    return long_text, encoder.tokenizer.decode(ids[:30])


def _cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_a_saved_model_reads_past_the_training_max_len(tiny_base, tmp_path):
    import structcse
    from sentence_transformers import SentenceTransformer

    from train.encoder import Encoder

    encoder = Encoder(str(tiny_base), pooling="mean", max_len=16).eval()
    assert encoder.read_len == 128  # the tiny base's own limit (its position embeddings and tokenizer)
    long_text, prefix = _long_and_prefix(encoder)
    # training still cuts at max_len
    assert encoder.tokenize([long_text])["input_ids"].shape[1] == 16
    in_process = encoder.encode([long_text, prefix]).numpy()
    assert _cosine(*in_process) < 0.9999

    folder = encoder.save_sentence_transformer(tmp_path / "model")
    st = SentenceTransformer(str(folder), device="cpu")
    assert st.max_seq_length == 128
    assert st.tokenizer.model_max_length == 128
    plain = st.encode([long_text, prefix])
    assert _cosine(*plain) < 0.9999
    np.testing.assert_allclose(plain, in_process, rtol=1e-4, atol=1e-5)

    loaded = structcse.load(folder, device="cpu")
    assert _cosine(*loaded.encode([long_text, prefix])) < 0.9999
    # a model written at the old limit reads at another one when asked
    cut = structcse.load(folder, device="cpu", max_seq_length=16)
    assert _cosine(*cut.encode([long_text, prefix])) > 0.99999


def test_the_reading_limit_of_a_sentence_transformers_base_is_its_max_seq_length(tiny_base, tmp_path):
    from train.encoder import Encoder

    base = Encoder(str(tiny_base), pooling="mean", max_len=16).eval()
    base.read_len = 48  # a sentence-transformers base whose own limit is 48
    folder = base.save_sentence_transformer(tmp_path / "st_base")
    assert Encoder(str(folder), pooling="mean", max_len=16).read_len == 48
    # a training max_len above the base's limit is read at max_len
    assert Encoder(str(folder), pooling="mean", max_len=64).read_len == 64
