"""eval.stc: EASE's short-text clustering task (readers, Hungarian accuracy, the KMeans protocol, the CLI).

No Ray and no network. The end-to-end runs use a keyword feature extractor
(each text -> the one-hot vector of the topic word it contains), so the
clusters, and so the accuracy, are known exactly; one CLI run uses a tiny
BERT built here and checks the CLI's figures against ``evaluate_stc`` on the
same encoder.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from eval import stc

KEYWORDS = ("sport", "music", "cooking")


class KeywordEncoder:
    """A deterministic feature extractor: the one-hot vector of the first keyword in the text (zeros if none),
    scaled by ``scale`` (to show that nothing normalises it)."""

    def __init__(self, scale: float = 1.0):
        self.scale = scale
        self.calls: list[tuple[list[str], int]] = []

    def encode(self, texts, batch_size=64, **_):
        texts = list(texts)
        self.calls.append((texts, batch_size))
        out = np.zeros((len(texts), len(KEYWORDS)), dtype=np.float32)
        for i, text in enumerate(texts):
            hits = [k for k, word in enumerate(KEYWORDS) if word in text]
            if hits:
                out[i, hits[0]] = self.scale
        return out


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tab_lines(rows) -> str:
    return "".join(f"{label}\t{text}\n" for label, text in rows)


def json_lines(rows) -> str:
    return "".join(json.dumps({"text": text, "cluster": label}) + "\n" for label, text in rows)


# The separable set: each class has its own keyword. The mixed set: class x has one "music" text.
SEPARABLE = [(c, f"{word} text number {i}") for c, word in ((1, "sport"), (2, "music"), (3, "cooking"))
             for i in range(4)]
MIXED = ([("x", f"sport item {i}") for i in range(3)] + [("x", "music item odd")]
         + [("y", f"music item {i}") for i in range(4)] + [("z", f"cooking item {i}") for i in range(4)])


# ---------------------------------------------------------------- Hungarian accuracy


def brute_force_accuracy(gold, predicted) -> float:
    classes, clusters = sorted(set(gold)), sorted(set(predicted))
    if len(clusters) <= len(classes):  # every cluster gets a distinct class
        mappings = (dict(zip(clusters, perm)) for perm in itertools.permutations(classes, len(clusters)))
    else:  # every class gets a distinct cluster
        mappings = (dict(zip(perm, classes)) for perm in itertools.permutations(clusters, len(classes)))
    best = max(sum(m.get(p) == g for g, p in zip(gold, predicted)) for m in mappings)  # m: cluster -> class
    return best / len(gold)


def test_accuracy_of_a_permuted_labelling_is_one():
    gold = [0, 0, 1, 1, 1, 2, 2, 3]
    for perm in itertools.permutations(range(4)):
        assert stc.cluster_accuracy(gold, [perm[g] for g in gold]) == 1.0
    assert stc.cluster_accuracy(["a", "a", "b", "c"], [7, 7, 3, 5]) == 1.0


def test_accuracy_of_known_confusions():
    assert stc.cluster_accuracy([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]) == pytest.approx(5 / 6)
    # A: 3 in cluster 0, 2 in cluster 1; B: 3 in cluster 0; C: 1 in cluster 2. Greedy (A->0) would give 4/9;
    # the one-to-one optimum is A->1, B->0, C->2: 6/9.
    gold = ["A"] * 5 + ["B"] * 3 + ["C"]
    predicted = [0, 0, 0, 1, 1] + [0, 0, 0] + [2]
    assert stc.cluster_accuracy(gold, predicted) == pytest.approx(2 / 3)
    # more clusters than classes: the unmapped clusters count as wrong
    assert stc.cluster_accuracy([0, 0, 1, 1], [0, 1, 2, 3]) == pytest.approx(0.5)
    # fewer clusters than classes
    assert stc.cluster_accuracy([0, 1, 2, 2], [0, 0, 0, 0]) == pytest.approx(0.5)


def test_accuracy_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(5, 15))
        gold = rng.integers(0, 4, n).tolist()
        predicted = rng.integers(0, int(rng.integers(2, 5)), n).tolist()
        assert stc.cluster_accuracy(gold, predicted) == pytest.approx(brute_force_accuracy(gold, predicted))


def test_accuracy_input_errors():
    with pytest.raises(ValueError, match="gold has 2 labels, predicted 3"):
        stc.cluster_accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="no labels"):
        stc.cluster_accuracy([], [])


# ---------------------------------------------------------------- readers


def test_tab_reader(tmp_path):
    path = write(tmp_path / "agnews.txt", "1\tfirst text\n2\t second\ttext with a tab \r\n\n1\tthird\n\n\n")
    data = stc.read_stc_data(path)
    assert len(data) == 1
    d = data[0]
    assert (d.name, d.format, d.path, d.label_path) == ("agnews", "tab", str(path), None)
    assert d.texts == ["first text", "second\ttext with a tab", "third"]
    assert d.labels == ["1", "2", "1"] and d.n_clusters == 2
    assert stc.read_stc_data(write(tmp_path / "s.tsv", tab_lines(SEPARABLE)))[0].format == "tab"


def test_tab_reader_errors_name_file_and_line(tmp_path):
    path = write(tmp_path / "ts.txt", "1\tfine\n2\talso fine\n3 no tab here\n")
    with pytest.raises(ValueError, match=r"ts\.txt, line 3: no tab; expected label<TAB>text") as error:
        stc.check_stc_data(path)
    assert str(path) in str(error.value)
    path = write(tmp_path / "t.txt", "1\tfine\n\n \tno label\n")
    with pytest.raises(ValueError, match=r"t\.txt, line 3: empty label"):
        stc.check_stc_data(path)


def test_jsonl_reader(tmp_path):
    rows = [(37, "brain fluid buildup"), (14, "trailer talk"), ("news", "a string cluster")]
    path = write(tmp_path / "tweet.jsonl", json_lines(rows) + "\n\n")
    d = stc.read_stc_data(path)[0]
    assert (d.name, d.format) == ("tweet", "jsonl")
    assert d.texts == [t for _, t in rows] and d.labels == ["37", "14", "news"]
    # EASE ships Tweet as tweet.txt: a .txt whose first line is a JSON object is read as JSON lines
    d = stc.read_stc_data(write(tmp_path / "txt" / "tweet.txt", json_lines(rows)))[0]
    assert d.format == "jsonl" and d.labels == ["37", "14", "news"]


@pytest.mark.parametrize("bad_line, message", [
    ('{"text": "broken", "cluster": 3', "not valid JSON"),
    ('{"text": "no cluster"}', "lacks 'cluster'"),
    ('{"cluster": 3}', "lacks 'text'"),
    ('{"text": 5, "cluster": 3}', "'text' is int, not a string"),
    ('{"text": "t", "cluster": null}', "'cluster' is None"),
    ('{"text": "t", "cluster": true}', "'cluster' is True"),
    ('["text", 3]', "expected a JSON object"),
])
def test_jsonl_reader_errors_name_file_and_line(tmp_path, bad_line, message):
    path = write(tmp_path / "tweet.json", json_lines([(1, "ok"), (2, "fine")]) + "\n" + bad_line + "\n")
    with pytest.raises(ValueError, match=r"tweet\.json, line 4: ") as error:
        stc.check_stc_data(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_parallel_reader(tmp_path):
    text = write(tmp_path / "biomedical.txt", "alpha text\n\nbeta text\ngamma text\n\n")
    label = write(tmp_path / "biomedical_label.txt", "1\n2\n2\n3\n")
    for given in (text, label, tmp_path):  # either file of the pair, or the folder
        data = stc.read_stc_data(given)
        assert len(data) == 1
        d = data[0]
        assert (d.name, d.format, d.path, d.label_path) == ("biomedical", "parallel", str(text), str(label))
        assert d.texts == ["alpha text", "beta text", "gamma text"] and d.labels == ["1", "2", "3"]
        assert d.skipped_empty == 1  # line 2's text is blank: skipped, its label kept in step


def test_parallel_reader_errors(tmp_path):
    text = write(tmp_path / "so.txt", "a\nb\nc\n")
    label = write(tmp_path / "so_label.txt", "1\n2\n\n")
    with pytest.raises(ValueError) as error:
        stc.check_stc_data(tmp_path)
    message = str(error.value)
    assert str(text) in message and str(label) in message and "3 lines" in message and "has 2" in message
    write(label, "1\n\n2\n")
    with pytest.raises(ValueError, match=r"so_label\.txt, line 2: empty label"):
        stc.check_stc_data(text)
    label.unlink()
    write(tmp_path / "orphan_label.txt", "1\n")
    with pytest.raises(FileNotFoundError, match=r"orphan_label\.txt: its text file .*orphan\.txt is missing"):
        stc.check_stc_data(tmp_path)


def test_mewsc16_reader(tmp_path):
    folder = tmp_path / "mewsc16"
    sentences = write(folder / "en_sentences.txt", "Storm hits the coast.\n\nElection results announced.\n")
    categories = write(folder / "en_categories.txt", "Weather\nSports\nPolitics\n")
    write(folder / "ja_sentences.txt", "台風が上陸した。\n選挙の結果が発表された。\n")
    write(folder / "ja_categories.txt", "Weather\nPolitics\n")
    data = stc.read_stc_data(folder)
    assert [d.name for d in data] == ["MewsC16-en", "MewsC16-ja"]
    en = data[0]
    assert (en.format, en.path, en.label_path) == ("mewsc16", str(sentences), str(categories))
    assert en.texts == ["Storm hits the coast.", "Election results announced."]
    assert en.labels == ["Weather", "Politics"] and en.skipped_empty == 1
    assert stc.read_stc_data(categories)[0].name == "MewsC16-en"
    write(folder / "de_sentences.txt", "a\nb\n")
    write(folder / "de_categories.txt", "x\n")
    with pytest.raises(ValueError, match=r"de_sentences\.txt has 2 lines but .*de_categories\.txt has 1"):
        stc.check_stc_data(folder)


def test_folder_with_every_format(tmp_path):
    write(tmp_path / "agnews.txt", tab_lines(SEPARABLE))
    write(tmp_path / "tweet.jsonl", json_lines(MIXED))
    write(tmp_path / "searchsnippets.txt", "".join(t + "\n" for _, t in SEPARABLE))
    write(tmp_path / "searchsnippets_label.txt", "".join(f"{c}\n" for c, _ in SEPARABLE))
    write(tmp_path / "en_sentences.txt", "sport a\nmusic b\n")
    write(tmp_path / "en_categories.txt", "S\nM\n")
    write(tmp_path / "README.md", "not data\n")
    write(tmp_path / ".hidden.txt", "ignored\n")
    data = stc.check_stc_data(tmp_path, "test")
    assert [(d.name, d.format, len(d), d.n_clusters) for d in data] == [
        ("MewsC16-en", "mewsc16", 2, 2), ("agnews", "tab", 12, 3),
        ("searchsnippets", "parallel", 12, 3), ("tweet", "jsonl", 12, 3)]
    assert [len(d) for d in stc.read_stc_data(tmp_path, limit=5)] == [2, 5, 5, 5]


def test_folder_and_option_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="STC data path does not exist"):
        stc.check_stc_data(tmp_path / "missing")
    write(tmp_path / "empty" / "notes.md", "x\n")
    with pytest.raises(FileNotFoundError, match="no STC dataset in"):
        stc.check_stc_data(tmp_path / "empty")
    write(tmp_path / "plain" / "stackoverflow.txt", "\nhow to sort a list\n")
    with pytest.raises(ValueError, match=r"stackoverflow\.txt, line 2: cannot tell the STC format.*"
                                         r"no stackoverflow_label\.txt"):
        stc.check_stc_data(tmp_path / "plain")
    write(tmp_path / "dup" / "a.txt", tab_lines(SEPARABLE))
    write(tmp_path / "dup" / "a.json", json_lines(SEPARABLE))
    with pytest.raises(ValueError, match="two STC datasets named 'a'"):
        stc.check_stc_data(tmp_path / "dup")
    one = write(tmp_path / "one.txt", tab_lines(SEPARABLE))
    with pytest.raises(ValueError, match="unknown STC split 'dev'"):
        stc.check_stc_data(one, "dev")
    with pytest.raises(ValueError, match=r"single\.txt: 12 texts but only 1 distinct label; clustering needs"):
        stc.check_stc_data(write(tmp_path / "single.txt", tab_lines((1, t) for _, t in SEPARABLE)))
    with pytest.raises(ValueError, match=r"3 texts but only 1 distinct label.*\(raise limit\)"):
        stc.check_stc_data(one, limit=3)
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        stc.check_stc_data(one, limit=0)
    with pytest.raises(ValueError, match="no text to cluster"):
        stc.check_stc_data(write(tmp_path / "blank.jsonl", "\n\n"))
    with pytest.raises(ValueError, match="not an STC data file"):
        stc.check_stc_data(write(tmp_path / "data.csv", "1,a\n"))


# ---------------------------------------------------------------- the protocol end to end


def test_embeddings_are_raw_float64_and_each_text_encoded_once():
    model = KeywordEncoder(scale=3.0)
    emb = stc.embed_texts(model, ["sport a", "music b", "sport a"], batch_size=7)
    assert emb.dtype == np.float64
    np.testing.assert_array_equal(emb, [[3, 0, 0], [0, 3, 0], [3, 0, 0]])  # not L2-normalised
    assert model.calls == [(["sport a", "music b"], 7)]


def test_evaluate_stc_separable_and_mixed(tmp_path):
    write(tmp_path / "separable.txt", tab_lines(SEPARABLE))
    write(tmp_path / "mixed.jsonl", json_lines(MIXED))
    result = stc.evaluate_stc(KeywordEncoder(scale=5.0), tmp_path, "test", batch_size=4, seeds=(0, 1, 2))
    sep, mixed = result["per_dataset"]["separable"], result["per_dataset"]["mixed"]
    assert set(result["per_dataset"]) == {"separable", "mixed"}
    assert sep["accuracy_mean"] == 1.0 and sep["accuracy_std"] == 0.0
    assert sep["nmi_mean"] == pytest.approx(1.0) and sep["seed42"]["accuracy"] == 1.0
    assert sep["accuracy_per_seed"] == [1.0, 1.0, 1.0]
    assert (sep["n_texts"], sep["n_clusters"], sep["format"], sep["path"]) == (
        12, 3, "tab", str(tmp_path / "separable.txt"))
    # mixed: the three keyword points are the three clusters; x = {sport: 3, music: 1}, y = {music: 4},
    # z = {cooking: 4}; the matching x->sport, y->music, z->cooking gets 11 of 12
    assert mixed["accuracy_mean"] == pytest.approx(11 / 12) and mixed["accuracy_std"] == pytest.approx(0.0)
    assert mixed["seed42"]["accuracy"] == pytest.approx(11 / 12)
    from sklearn.metrics import normalized_mutual_info_score

    keyword_partition = [next(w for w in KEYWORDS if w in t) for _, t in MIXED]
    expected_nmi = normalized_mutual_info_score([c for c, _ in MIXED], keyword_partition)
    assert expected_nmi < 1.0
    assert mixed["nmi_mean"] == pytest.approx(expected_nmi) and mixed["seed42"]["nmi"] == pytest.approx(expected_nmi)
    assert result["accuracy"] == pytest.approx((1.0 + 11 / 12) / 2)
    assert result["accuracy_seed42"] == pytest.approx((1.0 + 11 / 12) / 2)
    assert result["nmi"] == pytest.approx((sep["nmi_mean"] + expected_nmi) / 2)
    assert (result["task"], result["split"], result["data"]) == ("stc", "test", str(tmp_path))
    assert (result["n_datasets"], result["n_texts"], result["seeds"]) == (2, 24, [0, 1, 2])
    assert isinstance(result["seconds"], float)
    json.dumps(result)  # plain JSON types only


def test_evaluate_stc_defaults_limit_and_seed_errors(tmp_path):
    path = write(tmp_path / "mixed.txt", tab_lines(MIXED))
    result = stc.evaluate_stc(KeywordEncoder(), path)
    d = result["per_dataset"]["mixed"]
    assert result["seeds"] == [0, 1, 2, 3, 4] and len(d["accuracy_per_seed"]) == 5
    assert d["accuracy_mean"] == pytest.approx(11 / 12)
    limited = stc.evaluate_stc(KeywordEncoder(), path, limit=8, seeds=(42,))  # x (4 texts) and y (4 texts)
    d = limited["per_dataset"]["mixed"]
    assert (d["n_texts"], d["n_clusters"]) == (8, 2)
    # 2 clusters over {sport: 3 x}, {music: 1 x + 4 y}: x->sport, y->music gets 7 of 8
    assert d["accuracy_mean"] == pytest.approx(7 / 8) == d["seed42"]["accuracy"]
    with pytest.raises(ValueError, match="seeds must be a non-empty list of integers"):
        stc.evaluate_stc(KeywordEncoder(), path, seeds=())
    with pytest.raises(ValueError, match="unknown STC split"):
        stc.evaluate_stc(KeywordEncoder(), path, "train")


# ---------------------------------------------------------------- registry and CLI


def test_registered():
    from eval.tasks import get_task

    task = get_task("stc")
    assert task.splits == ("test",) and task.model_kind == "encoder" and task.options == ("limit",)
    assert task.check_data is stc.check_stc_data and task.run is stc.evaluate_stc


def test_cli_data_errors_before_any_model(tmp_path, capsys):
    from eval.cli import main

    bad = write(tmp_path / "data" / "ag.txt", "1\ta\n2 b\n")
    code = main(["--task", "stc", "--model", str(tmp_path / "no_model"), "--data", str(bad.parent)])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}, line 2: no tab" in err and "Traceback" not in err
    code = main(["--task", "stc", "--model", str(tmp_path / "no_model"), "--data", str(bad.parent), "--split", "dev"])
    assert code == 2 and "task stc has no split 'dev'" in capsys.readouterr().err


def test_cli_runs_stc_on_a_tiny_bert(tmp_path, capsys):
    from eval.cli import main
    from eval.models import load_encoder
    from train.tiny_bert import build_tiny_bert

    data = tmp_path / "data"
    write(data / "agnews.txt", tab_lines(SEPARABLE))
    write(data / "tweet.jsonl", json_lines(MIXED))
    model = build_tiny_bert([t for _, t in SEPARABLE + MIXED], tmp_path / "tiny", vocab_size=200, hidden_size=16,
                            num_layers=1, num_heads=2, intermediate_size=32, max_position_embeddings=32)
    out = tmp_path / "result.json"
    code = main(["--task", "stc", "--model", str(model), "--data", str(data), "--limit", "10",
                 "--device", "cpu", "--output", str(out)])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result == json.loads(out.read_text(encoding="utf-8"))
    assert (result["task"], result["split"], result["n_datasets"], result["n_texts"]) == ("stc", "test", 2, 20)
    direct = stc.evaluate_stc(load_encoder(model, device="cpu"), data, limit=10)
    for name in ("agnews", "tweet"):
        for key in ("accuracy_mean", "nmi_mean", "n_texts", "n_clusters"):
            assert result["per_dataset"][name][key] == pytest.approx(direct["per_dataset"][name][key])
    assert result["accuracy"] == pytest.approx(direct["accuracy"])
    assert 0.0 < result["accuracy"] <= 1.0
