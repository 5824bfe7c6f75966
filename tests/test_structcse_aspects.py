"""structcse aspects: which models make up Table 5, and the table's shape."""

from __future__ import annotations

import argparse

import pytest

from structcse import aspects


def test_models_of_table_5():
    runs = aspects.models_to_train(["P17", "P452"])
    assert runs == [("mnrl-P17", "aspectcse_mnrl", "single-P17"), ("mnrl-P452", "aspectcse_mnrl", "single-P452"),
                    ("aspectcse-single-P17", "aspectcse", "single-P17"),
                    ("aspectcse-single-P452", "aspectcse", "single-P452"),
                    ("aspectcse-intersection", "aspectcse", "intersection"), ("aspectcse-union", "aspectcse", "union")]
    assert aspects.models_to_train(["P17"]) == [("mnrl-P17", "aspectcse_mnrl", "single-P17"),
                                               ("aspectcse-single-P17", "aspectcse", "single-P17")]


def test_table_has_table_5s_rows_and_columns():
    cell = {"P@10": 0.5, "R@10": 0.25, "MRR@10": 0.75}
    rows = {"generic": {"P17": cell, "P452": None}, "union": {"P17": cell, "P452": cell}}
    table = aspects.table_markdown(rows, ["P17", "P452"]).splitlines()
    assert table[0] == ("| model | country P@10 | country R@10 | country MRR@10 | "
                        "industry P@10 | industry R@10 | industry MRR@10 | Δ country P@10 vs generic | "
                        "Δ industry P@10 vs generic | vs generic |")
    assert table[2] == ("| generic: the untrained base encoder (the paper's: SimCSE-sup) | 0.500 | 0.250 | 0.750 "
                        "| – | – | – | – | – | base |")
    assert table[3].startswith("| AspectCSE multi-aspect (∪) | 0.500")
    assert table[3].endswith("| +0.000 | – | ≤ generic: country P@10 |")  # equal to the base: not above it


def test_arguments_need_a_source_and_pass_training_overrides():
    parser = argparse.ArgumentParser()
    aspects.add_arguments(parser)
    args = parser.parse_args(["--sets", "s", "--set", "use_gpu=true", "--set", "max_steps=5"])
    assert args.overrides == ["use_gpu=true", "max_steps=5"] and args.aspects == ["P17", "P452"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o"])


def test_the_ceiling_is_an_oracle_rankings_score_and_no_ranking_beats_it():
    import numpy as np

    from score.aspects import retrieval_ceiling, retrieval_metrics

    rng = np.random.default_rng(0)
    names = ["a", "b", "c", "d"]
    labels = [frozenset(rng.choice(names, size=rng.integers(1, 3), replace=False)) for _ in range(40)]
    labels += [frozenset({"alone"})]  # no relevant document: not a seed
    ceiling = retrieval_ceiling(labels, ks=(5, 10, 50))
    assert ceiling["n_seeds"] == 40 and ceiling["MRR@10"] == 1.0 and ceiling["P@5"] == 1.0
    assert ceiling["P@50"] == pytest.approx(np.mean([sum(bool(l & m) for m in labels) - 1 for l in labels[:40]]) / 40)
    for _ in range(5):
        scored = retrieval_metrics(rng.normal(size=(len(labels), 8)), labels, ks=(5, 10, 50))
        assert all(scored[k] <= ceiling[k] + 1e-9 for k in ceiling if "@" in k)
    one_hot = np.eye(2)[[0] * 20 + [1] * 20]  # single labels: the embedding of the label itself is an oracle
    single = [frozenset({"x"})] * 20 + [frozenset({"y"})] * 20
    oracle = retrieval_metrics(one_hot, single, ks=(5, 10, 50))
    assert {k: v for k, v in retrieval_ceiling(single, ks=(5, 10, 50)).items()} == pytest.approx(oracle)


def test_the_aspect_world_never_writes_a_label_and_has_several_labels_and_distractors():
    from structcse.demo.aspect_world import INDUSTRY_WORK, build_aspect_world

    world, companies, label_qid = build_aspect_world(seed=0, companies=600)
    labels = [*world, *INDUSTRY_WORK]
    assert not [(c.title, label) for c in companies for label in labels if label.casefold() in c.text.casefold()]
    assert sum(len({country for _, country in c.cities}) > 1 for c in companies) > 60
    assert sum(len(c.industries) > 1 for c in companies) > 60
    # each text names its own head-office city; some also name a city of a country the company is not in
    assert all(c.cities[0][0] in c.text for c in companies)
    foreign = {city: country for country, cities in world.items() for city in cities}
    misleading = [c for c in companies if any(f" {city} " in f" {c.text.replace('.', ' ')} " and
                                              foreign[city] not in {k for _, k in c.cities} for city in foreign)]
    assert len(misleading) > 60
    assert build_aspect_world(seed=0, companies=600)[1][7].text == companies[7].text
