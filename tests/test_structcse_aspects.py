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
                        "industry P@10 | industry R@10 | industry MRR@10 |")
    assert table[2] == "| generic (base encoder) | 0.500 | 0.250 | 0.750 | – | – | – |"
    assert table[3].startswith("| AspectCSE multi-aspect (∪) | 0.500")


def test_arguments_need_a_source_and_pass_training_overrides():
    parser = argparse.ArgumentParser()
    aspects.add_arguments(parser)
    args = parser.parse_args(["--sets", "s", "--set", "use_gpu=true", "--set", "max_steps=5"])
    assert args.overrides == ["use_gpu=true", "max_steps=5"] and args.aspects == ["P17", "P452"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o"])
