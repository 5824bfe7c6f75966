"""STS at the papers' protocol (eval.sts_all): SentEval's STS12–16 layout scored "all", STS-B, SICK-R, the mean."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from tests.conftest import shared_data
from tests.test_eval import minilm_folder

PAIRS = [("a man is playing a guitar .", "a man plays the guitar .", 4.8),
         ("a woman is slicing an onion .", "a man is playing a flute .", 0.2),
         ("a dog runs in the park .", "a dog is running on grass .", 3.6),
         ("the stock market fell today .", "kids are playing football .", 0.0),
         ("a child rides a horse .", "a kid is riding a pony .", 4.0),
         ("two men are fighting .", "two people are cooking .", 1.0)]


def _year(root, year, subsets):
    folder = root / "STS" / f"STS{year}-en-test"
    folder.mkdir(parents=True)
    for subset, rows, golds in subsets:
        (folder / f"STS.input.{subset}.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in rows))
        (folder / f"STS.gs.{subset}.txt").write_text("".join(f"{g}\n" for g in golds))
    return folder


@pytest.fixture(scope="module")
def downstream(tmp_path_factory):
    """A SentEval data/downstream tree: STS12 (two subsets, one unscored pair), STS13 (with SMT, left out),
    STSBenchmark (test), SICK (SentEval's test file)."""
    root = tmp_path_factory.mktemp("downstream")
    _year(root, 12, [("MSRvid", PAIRS[:3], [r[2] for r in PAIRS[:3]]),
                     ("OnWN", PAIRS[3:], ["0.0", "", "1.0"])])  # the blank gold line: unscored, skipped
    _year(root, 13, [("headlines", PAIRS, [r[2] for r in PAIRS]), ("SMT", PAIRS[:2], [5.0, 0.0])])
    stsb = root / "STS" / "STSBenchmark"
    stsb.mkdir()
    (stsb / "sts-test.csv").write_text("".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g}\t{a}\t{b}\n"
                                               for i, (a, b, g) in enumerate(PAIRS)))
    sick = root / "SICK"
    sick.mkdir()
    (sick / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        + "".join(f"{i}\t{a}\t{b}\t{1 + g * 0.8:.1f}\tNEUTRAL\n" for i, (a, b, g) in enumerate(PAIRS)))
    return root


@pytest.fixture(scope="module")
def minilm():
    from eval.models import load_encoder

    return load_encoder(minilm_folder(), device="cpu")


def test_finds_every_layout(downstream):
    from score.sts_sets import find_sets

    assert list(find_sets(downstream)) == ["STS12", "STS13", "STSBenchmark", "SICK-R"]
    assert list(find_sets(downstream / "STS")) == ["STS12", "STS13", "STSBenchmark"]
    assert list(find_sets(downstream / "STS" / "STS12-en-test")) == ["STS12"]
    assert list(find_sets(downstream / "SICK")) == ["SICK-R"]
    assert find_sets(downstream, "dev") == {}  # STS12–16 have only test; no dev files here


def test_all_setting_is_one_spearman_over_the_concatenation(downstream, minilm):
    from eval.sts_all import evaluate_sts_all

    result = evaluate_sts_all(minilm, downstream, "test")
    assert result["similarity"] == "cosine"
    assert result["missing"] == ["STS14", "STS15", "STS16"]
    sts12 = result["sets"]["STS12"]
    assert sts12["n_pairs"] == 5 and sts12["skipped"] == 1
    assert result["sets"]["STS13"]["n_pairs"] == 6  # SMT left out
    emb = minilm.encode([p[0] for p in PAIRS] + [p[1] for p in PAIRS], normalize_embeddings=True)
    cos = np.sum(emb[:6] * emb[6:], axis=1).astype(np.float64)
    kept = [0, 1, 2, 3, 5]
    expected = spearmanr(cos[kept], np.array([PAIRS[i][2] for i in kept])).statistic
    assert sts12["spearman"] == pytest.approx(expected, abs=1e-6)
    assert set(sts12["subsets"]) == {"MSRvid", "OnWN", "mean", "wmean"}
    assert result["STS12"] == sts12["spearman"]
    assert result["mean"] == pytest.approx(np.mean([result[s] for s in ("STS12", "STS13", "STSBenchmark",
                                                                         "SICK-R")]))


def test_malformed_rows_are_skipped_counted_and_named(tmp_path):
    """One rule for a bad row in every STS reader: skipped, counted, named with file:line and reason;
    a file-level fault (gold and input of different lengths) is still an error."""
    from score.sts_sets import read_sets

    folder = _year(tmp_path, 14, [("news", PAIRS[:3], ["4.8", "7.5", "1.0"])])
    sts14 = read_sets(folder)["STS14"]
    assert (len(sts14), sts14.skipped) == (2, 1)
    assert sts14.bad_rows == [f"{folder / 'STS.gs.news.txt'}:2: gold score 7.5 is outside the scale 0–5"]
    (folder / "STS.gs.news.txt").write_text("4.8\n")
    with pytest.raises(ValueError, match="has 3 lines but STS.gs.news.txt has 1"):
        read_sets(folder)
    (folder / "STS.gs.news.txt").write_text("4.8\n1.0\n2.0\n")
    (folder / "STS.input.news.txt").write_text("only one sentence\nb\tc\nd\te\n")
    sts14 = read_sets(folder)["STS14"]
    assert sts14.sentences1 == ["b", "d"] and sts14.scores == [1.0, 2.0]
    assert sts14.bad_rows == [f"{folder / 'STS.input.news.txt'}:1: expected two tab-separated sentences"]
    sick = tmp_path / "SICK"
    sick.mkdir()
    (sick / "SICK_test_annotated.txt").write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tx\n"
                                                  "1\ta\tb\t0.5\tNEUTRAL\n2\tc\td\t4.5\tNEUTRAL\n"
                                                  "3\te\tf\t1.5\tNEUTRAL\n")
    sick_r = read_sets(sick)["SICK-R"]
    assert (sick_r.scores, sick_r.skipped) == ([4.5, 1.5], 1)
    assert sick_r.bad_rows == [f"{sick / 'SICK_test_annotated.txt'}:2: gold score 0.5 is outside the scale 1–5"]


def test_shared_samples_dev_split(minilm):
    """STS-B dev (raw) and SICK trial (SentEval's file, and the original SICK.txt slice): the same pairs
    the single-set eval reads, the same Spearman to 1e-4."""
    from eval.sts import score_pairs
    from score.sts_data import read_sts
    from score.sts_sets import read_sick, read_stsb

    stsb_dir = shared_data("stsb", "raw")
    sick_senteval, sick_original = shared_data("sick", "senteval"), shared_data("sick", "original")
    stsb = read_stsb(stsb_dir, "dev")
    assert len(stsb) == 1500
    single = read_sts(stsb_dir, "dev")
    assert stsb.scores == single.scores
    trial, original = read_sick(sick_senteval, "dev"), read_sick(sick_original, "dev")
    assert len(trial) == 500 and len(original) == 495
    train = read_sick(sick_original, "train")
    assert len(train) == 4439
    third = single.head(300)
    from eval.sts_all import evaluate_sts_all

    result = evaluate_sts_all(minilm, stsb_dir, "dev", limit=300)
    assert result["STSBenchmark"] == pytest.approx(score_pairs(minilm, third)["spearman"], abs=1e-4)


@pytest.mark.end_to_end
def test_encoding_on_a_pool_of_ray_actors_gives_the_same_scores(ray_session, downstream):
    from eval.actor_encode import pool_resources
    from eval.models import load_trained
    from eval.sts_all import evaluate_sts_all

    path = str(minilm_folder())
    local_model = load_trained(path, device="cpu")
    local = evaluate_sts_all(local_model, downstream, "test")
    pooled_model = load_trained(path, device="cpu")
    pooled = evaluate_sts_all(pooled_model, downstream, "test", actors=1)  # encode_on_actors fills its cache
    for name in local["sets"]:
        assert pooled[name] == pytest.approx(local[name], abs=1e-6)
    texts = [p[0] for p in PAIRS]
    assert set(texts) <= set(pooled_model.cache)
    assert np.allclose(np.stack([pooled_model.cache[t] for t in texts]), local_model.pooled(texts), atol=1e-5)
    with pytest.raises(ValueError, match="do not fit beside Ray Data's read tasks"):
        pool_resources(2)
