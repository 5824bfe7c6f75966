"""structcse dsbats: the demo world's BATS folder and WordNet dictionary to the slides' table, in one command."""

from __future__ import annotations

import json

from structcse import dsbats


def test_table_has_the_slides_rows_and_columns():
    rows = [{"model": "m", "trained": False, "srsd": 0.5818, "srsd_reversed": 0.5, "sts_avg": 0.1863, "mrpc": 0.6881},
            {"model": "m + DSBATS4CL", "trained": True, "srsd": 0.6427, "srsd_reversed": None, "sts_avg": None,
             "mrpc": 0.7014}]
    table = dsbats.table_markdown(rows).splitlines()
    assert table[0] == "| model | DSBATS4CL | SRSD | SRSD (reversed) | STS avg. | MRPC |"
    assert table[2] == "| m | w/o | 58.18 | 50.00 | 18.63 | 68.81 |"
    assert table[3] == "| m + DSBATS4CL | w/ | 64.27 | – | – | 70.14 |"


def test_one_command_from_bats_and_wordnet_to_the_table(demo_world, demo_tiny_bert, ray_session, tmp_path, capsys):
    from ingest.dsbats.bats import category_files
    from structcse.cli import main

    codes = sorted(category_files(demo_world.bats_dir)[1])
    out = tmp_path / "out"
    argv = ["dsbats", "--bats", str(demo_world.bats_dir), "--wordnet", str(demo_world.wordnet_dir),
            "--categories", *codes, "--positives-per-pair", "2", "--model", str(demo_tiny_bert), "--out", str(out),
            "--sts", str(demo_world.sts_dir), "--sts-split", "dev"]
    for override in ("max_steps=3", "batch_size=8", "pooling=mean", "cpus_per_worker=0.5", "max_len=32"):
        argv += ["--set", override]
    assert main(argv) == 0
    result = json.loads((out / "dsbats.json").read_text())
    assert [r["trained"] for r in result["rows"]] == [False, True]
    for row in result["rows"]:
        assert 0 <= row["srsd"] <= 1 and -1 <= row["sts_avg"] <= 1 and row["mrpc"] is None
    assert result["sizes"]["L01"] > 0 and result["set_rows"]["srsd"] > 0
    assert "| w/ |" in (out / "dsbats.md").read_text()
    capsys.readouterr()
    assert main(["dsbats", "--bats", str(demo_world.bats_dir), "--wordnet", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert str(tmp_path) in capsys.readouterr().err
