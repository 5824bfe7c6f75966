"""Keyed dropout masks (train.dropout_keys) and the append-only logs of an elastic run (infra.appendlog.append_text).

The masks' purpose, 2 workers equal to 1 big batch with dropout on, is tests/test_train_scale.py's
``test_keyed_dropout_masks_make_two_workers_equal_one_big_batch``; a resized run against a fixed-size one
in float64 is bench/elastic.py.
"""

from __future__ import annotations

import json

import pytest
import torch

from train.dropout_keys import add_row_keys, keep_mask, keyed_dropout, mix, mix_int, row_keys, second_copy, token_keys


def test_masks_keep_one_minus_p_and_differ_by_row_site_step_and_copy():
    keys = row_keys(seed=0, step=3, column=0, rows=torch.arange(64))
    tokens = token_keys(keys, 16)
    for p in (0.1, 0.5):
        kept = keep_mask(tokens, site=4, inner=256, p=p).double().mean()
        assert abs(float(kept) - (1 - p)) < 0.01  # 262,144 draws
    mask = keep_mask(tokens, 4, 256, 0.1)
    assert not torch.equal(mask, keep_mask(tokens, 5, 256, 0.1))  # another site
    assert not torch.equal(mask[0], mask[1])  # another row
    other_step = token_keys(row_keys(0, 4, 0, torch.arange(64)), 16)
    assert not torch.equal(mask, keep_mask(other_step, 4, 256, 0.1))
    assert not torch.equal(mask, keep_mask(token_keys(second_copy(keys), 16), 4, 256, 0.1))
    x = torch.ones(64, 16, 256, dtype=torch.float64)
    assert float(keyed_dropout(x, tokens, 4, 0.1).sum() / x.numel()) == pytest.approx(1.0, abs=0.01)  # 1/(1-p)


def test_a_row_gets_its_mask_wherever_it_sits():
    """Rows 8..15 of the global batch: the same keys whether a worker holds them as its rows 0..7
    (2 workers) or they are rows 8..15 of one worker's batch; a mask is a function of the key alone."""
    whole = add_row_keys({"s": {"input_ids": torch.zeros(16, 4, dtype=torch.long)}}, 1, 7, 0)["s"]["row_keys"]
    share = add_row_keys({"s": {"input_ids": torch.zeros(8, 4, dtype=torch.long)}}, 1, 7, 8)["s"]["row_keys"]
    assert torch.equal(whole[8:], share)
    assert torch.equal(keep_mask(token_keys(whole, 4)[8:], 2, 32, 0.1), keep_mask(token_keys(share, 4), 2, 32, 0.1))
    two = add_row_keys({"a": {"input_ids": torch.zeros(4, 4, dtype=torch.long)},
                        "b": {"input_ids": torch.zeros(4, 4, dtype=torch.long)}}, 1, 7, 0)
    assert not torch.equal(two["a"]["row_keys"], two["b"]["row_keys"])  # each column its own keys


def test_the_tensor_hash_is_splitmix64():
    """The int64 tensor arithmetic (wrapping, logical shifts) gives what Python's unbounded ints give."""
    values = [0, 1, 2**62 + 12345, -1, -(2**63)]
    got = mix(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [mix_int(v) for v in values]


def test_append_only_logs_write_each_line_once(tmp_path, s3_server):
    """A local log is appended to; in a bucket each append is a new object. Either reads back whole."""
    from infra.appendlog import append_text, appended_logs, read_appended

    for root in (str(tmp_path), f"{s3_server}/append-{tmp_path.name}"):
        path = f"{root}/logs/rank0.jsonl"
        assert read_appended(path) == ""
        for i in range(3):
            append_text(path, json.dumps({"step": i}) + "\n")
        assert [json.loads(line)["step"] for line in read_appended(path).splitlines()] == [0, 1, 2]
        append_text(f"{root}/logs/rank1.jsonl", "x\n")
        assert appended_logs(f"{root}/logs", ".jsonl") == [f"{root}/logs/rank0.jsonl", f"{root}/logs/rank1.jsonl"]
    assert (tmp_path / "logs" / "rank0.jsonl").stat().st_size == len("".join(json.dumps({"step": i}) + "\n"
                                                                              for i in range(3)))


def test_the_sample_log_appends_the_steps_since_the_last_checkpoint(tmp_path):
    """Bytes written grow with the steps (each line once), not with their square."""
    import numpy as np

    from train.global_order import SampleLog, read_sample_logs

    log = SampleLog(str(tmp_path), rank=0, world=1, start_step=0)
    for step in range(30):
        log.add(step, np.arange(4) + step)
        if step % 10 == 9:
            log.flush()
    size = (tmp_path / "sample_ids" / "rank0-of1-from0000000.jsonl").stat().st_size
    line = len(json.dumps({"step": 10, "rank": 0, "world": 1, "ids": [10, 11, 12, 13]})) + 1
    assert size <= 30 * line
    steps = read_sample_logs(str(tmp_path))
    assert sorted(steps) == list(range(30)) and steps[17] == [[17, 18, 19, 20]]
