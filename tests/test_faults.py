"""Faults in the input end in a counted loss and an exit status that says so (issue 21)."""

from __future__ import annotations

import bz2
import json

import pytest


def test_a_truncated_dump_exits_1_naming_the_file_unless_the_loss_is_accepted(demo_world, ray_session, tmp_path,
                                                                               capsys):
    from ingest.__main__ import main

    xml = bz2.decompress(demo_world.wikipedia_dump.read_bytes())  # multistream: one bz2 stream per page group
    packed = bz2.compress(xml)
    cut = tmp_path / "enwiki-cut-pages-articles.xml.bz2"  # single-stream, cut at 59 %: a partial download
    cut.write_bytes(packed[: int(len(packed) * 0.59)])
    out = tmp_path / "out"
    assert main(["--wikipedia", str(cut), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{cut}" in err and "truncated" in err and f"{out}/manifest.json" in err and "--allow-loss" in err
    assert main(["--wikipedia", str(cut), "--out", str(out), "--allow-loss"]) == 0
    assert "warning: data lost" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["units_resumed"] == 0  # a unit whose input ended early is never marked done: read again


def test_a_dump_replaced_at_the_same_path_is_read_again(demo_world, ray_session, tmp_path):
    from ingest.pipeline import IngestConfig, run_ingest

    xml = bz2.decompress(demo_world.wikipedia_dump.read_bytes())
    dump = tmp_path / "enwiki-latest-pages-articles.xml.bz2"
    dump.write_bytes(bz2.compress(xml))
    cfg = IngestConfig(wikipedia=[str(dump)], out=str(tmp_path / "out"))
    first = run_ingest(cfg)
    assert first["units_resumed"] == 0 and first["pages"]["accounted"]
    assert run_ingest(cfg)["units_resumed"] == first["units"]  # unchanged input: every unit done
    dump.write_bytes(bz2.compress(xml, compresslevel=1))  # re-downloaded: other bytes at the same path
    again = run_ingest(cfg)
    assert again["units_resumed"] == 0 and again["pages"] == first["pages"]
    assert again["sources"][0]["sha256"] != first["sources"][0]["sha256"]


def test_a_missing_input_is_named_before_ray_starts(tmp_path, capsys, monkeypatch):
    import ray

    from ingest.__main__ import main

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started for a missing input"))
    assert main(["--wikipedia", str(tmp_path / "nowhere.xml.bz2"), "--out", str(tmp_path / "o"), "--num-cpus", "1"]) == 2
    assert "nowhere.xml.bz2" in capsys.readouterr().err


def test_lost_input_read_from_a_manifest():
    from ingest.lost_input import lost_input

    fine = {"sources": [{"path": "a", "accounted": True}], "wikidata": [], "pages": {"in_input": 3},
            "sets": {"sentences": {"rows": 5}, "entity_pairs": {"rows": 2}}, "links_accounted": True}
    assert lost_input(fine) == []
    empty = {**fine, "sets": {"sentences": {"rows": 0}}}
    assert lost_input(empty)[0].startswith("sentences: 0 rows from 3 pages")
    no_pairs = {**fine, "sets": {"sentences": {"rows": 5}, "entity_pairs": {"rows": 0}}}
    assert lost_input(no_pairs)[0].startswith("entity_pairs: 0 rows")
    lines = {**fine, "wikidata": [{"path": "w.json", "lines": 10, "written": 7, "skipped": {"bad_json": 1},
                                   "accounted": False}]}
    assert lost_input(lines) == ["w.json: 10 lines, 7 written + 1 skipped"]


def test_the_same_dump_given_twice_is_an_error_before_ray(demo_world, tmp_path, capsys, monkeypatch):
    import ray

    from ingest.__main__ import main

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started for a duplicated input"))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    alias = tmp_path / "enwiki-alias-pages-articles-multistream.xml.bz2"
    alias.symlink_to(demo_world.wikipedia_dump)
    assert main(["--wikipedia", str(demo_world.wikipedia_dump), str(alias), "--out", str(tmp_path / "o")]) == 2
    assert "given twice" in capsys.readouterr().err


def test_a_truncated_or_foreign_parquet_file_is_named_before_training(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from setformat import schemas
    from setformat.io import check_set

    folder = tmp_path / "sentences"
    folder.mkdir()
    rows = [{"sentence": f"s {i}", "page_id": i, "title": "t", "sentence_index": i, "wiki": "enwiki"} for i in range(50)]
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas.SENTENCES), folder / "part-00000.parquet")
    whole = (folder / "part-00000.parquet").read_bytes()
    check_set(folder, "sentences")
    (folder / "part-00001.parquet").write_bytes(whole[: len(whole) // 2])  # a partial copy
    with pytest.raises(schemas.SchemaError, match=r"part-00001\.parquet is not a readable parquet file"):
        check_set(folder, "sentences")
    pq.write_table(pa.table({"sentence": ["x"]}), folder / "part-00001.parquet")  # another set's file
    with pytest.raises(schemas.SchemaError, match=r"part-00001\.parquet has columns \['sentence'\]"):
        check_set(folder, "sentences")


def test_a_pair_row_with_bytes_that_are_not_utf8_is_dropped_and_counted_with_its_line(tmp_path):
    from ingest.pairs.readers import read_unit

    csv = tmp_path / "nli.csv"
    csv.write_bytes(b"sent0,sent1,hard_neg\n"
                    b"A man plays a guitar.,A man plays music.,A woman sleeps.\n"
                    b"A dog runs \xff\xfe fast.,An animal moves.,A cat sleeps.\n"  # line 3: Latin-1 bytes
                    b"Kids play outside.,Children are playing.,Kids sleep inside.\n")
    unit = {"source": 0, "unit": 0, "label": "nli.csv", "files": [str(csv)],
            "spec": {"kind": "simcse_csv", "min_chars": 1, "max_chars": 1000,
                     "columns": {"sent0": "sent0", "sent1": "sent1", "hard_neg": "hard_neg"}}}
    result = json.loads(read_unit({"unit": json.dumps(unit)}, str(tmp_path / "work"))["result"])
    assert result["records"] == 3 and result["valid"] == 4  # two good rows, two pairs each
    assert result["dropped"] == {"not_utf8": 2} and result["first"]["not_utf8"] == [3]
    assert result["pairs"] == result["valid"] + sum(result["dropped"].values())


def test_a_truncated_single_stream_dump_keeps_every_page_decoded_before_the_cut(demo_world, tmp_path):
    from ingest.wikipedia import LostPages, Page, iter_pages_from_file

    xml = bz2.decompress(demo_world.wikipedia_dump.read_bytes())
    packed = bz2.compress(xml, compresslevel=1)  # 100 kB blocks: whole blocks precede the cut
    cut = tmp_path / "enwiki-cut.xml.bz2"
    cut.write_bytes(packed[: int(len(packed) * 0.59)])
    items = list(iter_pages_from_file(cut))
    *pages, lost = items
    decodable = bz2.BZ2Decompressor().decompress(packed[: int(len(packed) * 0.59)])  # what any decoder reads
    whole_pages = decodable.count(b"</page>")
    assert whole_pages > demo_world.num_pages // 3
    assert len(pages) == whole_pages and all(isinstance(p, Page) for p in pages)
    assert isinstance(lost, LostPages) and lost.gap.at_end and lost.gap.end == len(packed[: int(len(packed) * 0.59)])
    assert lost.pages == 1  # the page the cut went through: opened, never closed


def _blocks_of(path):
    """Each block's decoded bytes of an intact file, checked against the whole file's decoding."""
    from ingest.bz2_blocks import decode_block, find_blocks

    with open(path, "rb") as f:
        texts = [decode_block(f, start, end) for start, end in find_blocks(f, path.stat().st_size)]
    assert b"".join(texts) == bz2.decompress(path.read_bytes())
    return texts


def test_a_corrupt_block_in_the_middle_loses_that_block_only_and_reading_goes_on(tmp_path):
    import re

    from ingest.bz2_blocks import find_blocks
    from ingest.wikipedia import LostPages, Page, iter_pages_from_file
    from tests.conftest import shared_data

    sample = shared_data("wikipedia_xml_sample",
                         "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    texts = _blocks_of(sample)
    assert len(texts) == 7  # 206 pages in seven 900 kB blocks
    clean = sample.read_bytes()
    with open(sample, "rb") as f:
        start, end = find_blocks(f, len(clean))[3]
    damaged = bytearray(clean)
    damaged[(start + end) // 16] ^= 0x10  # one bit in the middle of the fourth block
    path = tmp_path / "enwiki-flip-pages-articles.xml.bz2"
    path.write_bytes(bytes(damaged))
    page = re.compile(rb"<page>.*?</page>", re.S)
    expected = len(page.findall(b"".join(texts[:3]))) + len(page.findall(b"".join(texts[4:])))
    items = list(iter_pages_from_file(path))
    lost = [i for i in items if isinstance(i, LostPages)]
    assert sum(isinstance(i, Page) for i in items) == expected > 206 * 4 // 7
    assert len(lost) == 1 and lost[0].gap.start == start // 8 and lost[0].gap.end == (end + 7) // 8
    assert not lost[0].gap.at_end and lost[0].pages in (1, 2)


def _flip_a_middle_block(data: bytes, dump):
    """``data`` as a 100 kB-block bz2 file at ``dump`` (three blocks or more, checked by decoding each) with
    one bit flipped in the middle of the file; returns the intact compressed bytes and their block count."""
    packed = bz2.compress(data, compresslevel=1)
    dump.write_bytes(packed)
    blocks = len(_blocks_of(dump))
    assert blocks >= 3
    damaged = bytearray(packed)
    damaged[len(packed) // 2] ^= 0x01
    dump.write_bytes(bytes(damaged))
    return packed, blocks


def test_ingest_of_a_dump_with_a_corrupt_block_quarantines_it_and_exits_1(demo_world, ray_session, tmp_path, capsys):
    from ingest.__main__ import main

    dump = tmp_path / "enwiki-flip-pages-articles.xml.bz2"
    packed, _ = _flip_a_middle_block(bz2.decompress(demo_world.wikipedia_dump.read_bytes()), dump)
    damaged = dump.read_bytes()
    out = tmp_path / "out"
    assert main(["--wikipedia", str(dump), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}" in err and "damaged bzip2 blocks (bytes" in err and "truncated" not in err
    source = json.loads((out / "manifest.json").read_text())["sources"][0]
    assert source["damaged"] and not source["accounted"] and source["pages"]["corrupt_block"] >= 1
    [q] = source["quarantined"]
    assert q["offset"] < len(packed) // 2 < q["end"] and bytes(damaged[q["offset"]:q["end"]]) == \
        (out / "_quarantine" / q["copy"].rsplit("/", 1)[1]).read_bytes()
    written = source["pages"].get("written", 0) + source["pages"].get("redirect", 0)
    assert written > demo_world.num_pages // 2  # the blocks after the damage were read


@pytest.mark.end_to_end
def test_the_same_pages_in_two_inputs_are_written_once_and_counted(demo_world, demo_sets, ray_session, tmp_path):
    from ingest.pipeline import IngestConfig, run_ingest
    from setformat.io import read_table
    from structcse.demo import ENTITY_LINK_THRESHOLD

    single_out, single = demo_sets
    copy = tmp_path / "enwiki-copy-pages-articles.xml.bz2"  # the same pages, other bytes, another file
    copy.write_bytes(bz2.compress(bz2.decompress(demo_world.wikipedia_dump.read_bytes())))
    cfg = IngestConfig(wikipedia=[str(demo_world.wikipedia_dump), str(copy)], wikidata=[str(demo_world.wikidata_dump)],
                       out=str(tmp_path / "out"), shard_bytes=1, entity_link_threshold=ENTITY_LINK_THRESHOLD)
    manifest = run_ingest(cfg)
    pages = manifest["pages"]
    assert manifest["duplicate_pages"]["pages"] == single["pages"]["in_input"]
    assert pages["in_input"] == 2 * single["pages"]["in_input"] and pages["accounted"]
    assert pages["dropped"]["duplicate_page"] == single["pages"]["in_input"] and pages["written"] == single["pages"]["written"]
    for name in ("sentences", "entity_pairs", "intros"):
        assert manifest["sets"][name]["rows"] == single["sets"][name]["rows"] > 0, name
    got = read_table(tmp_path / "out" / "sentences", ["sentence"])["sentence"].to_pylist()
    assert sorted(got) == sorted(read_table(single_out / "sentences", ["sentence"])["sentence"].to_pylist())
    assert run_ingest(cfg)["sets"]["sentences"]["rows"] == single["sets"]["sentences"]["rows"]  # resumed: the same


def test_a_simcse_csv_without_hard_negatives_is_warned_about(tmp_path, project_log):
    from ingest.pairs import PairIngestConfig, PairSource
    from ingest.pairs.sources import resolve_sources

    csv = tmp_path / "nli.csv"
    csv.write_text("sent0,sent1\nA man plays a guitar.,A man plays music.\n")
    sources, _ = resolve_sources(PairIngestConfig(sources=[PairSource("simcse_csv", str(csv))], out=str(tmp_path / "o")),
                                 str(tmp_path / "work"))
    said = project_log.lines
    assert "no hard_neg column" in sources[0]["warning"] and "nli_triplets" in sources[0]["warning"]
    assert any("warning" in line and "nli.csv" in line for line in said)


def test_a_truncated_wikidata_bz2_keeps_the_lines_before_the_cut_and_says_where(demo_world, ray_session, tmp_path,
                                                                               capsys):
    from ingest.__main__ import main

    lines = bz2.decompress(demo_world.wikidata_dump.read_bytes())
    packed = bz2.compress(lines, compresslevel=1)
    cut = tmp_path / "wikidata-cut.json.bz2"  # was: RuntimeError std::exception in a Ray worker, no manifest
    cut.write_bytes(packed[: len(packed) * 7 // 10])
    out = tmp_path / "out"
    assert main(["--wikipedia", str(demo_world.wikipedia_dump), "--wikidata", str(cut), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{cut}: unreadable after uncompressed byte" in err and "ended before the end-of-stream marker" in err
    source = json.loads((out / "manifest.json").read_text())["wikidata"][0]
    readable = bz2.BZ2Decompressor().decompress(packed[: len(packed) * 7 // 10]).count(b"\n")
    assert source["truncated"] and not source["accounted"] and source["lines"] >= readable - 2 > 0


def test_a_wikidata_bz2_with_a_corrupt_block_is_read_on_after_it(demo_world, ray_session, tmp_path, capsys):
    from ingest.__main__ import main

    lines = bz2.decompress(demo_world.wikidata_dump.read_bytes())
    dump = tmp_path / "wikidata-flip.json.bz2"
    packed, blocks = _flip_a_middle_block(lines, dump)
    out = tmp_path / "out"
    assert main(["--wikipedia", str(demo_world.wikipedia_dump), "--wikidata", str(dump), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}: 1 run(s) of damaged bzip2 blocks (bytes" in err
    source = json.loads((out / "manifest.json").read_text())["wikidata"][0]
    [run] = source["damaged"]
    assert run["start"] < len(packed) // 2 < run["end"] and not source["truncated"] and not source["accounted"]
    entity_lines = lines.count(b'{"type"')
    read = source["written"] + sum(source["skipped"].values())
    assert source["lines"] == read and source["skipped"]["corrupt_block"] >= 1
    assert entity_lines - lines.count(b"\n") // blocks * 2 < read < entity_lines  # about one block lost


def test_a_copy_that_keeps_size_and_stamp_but_not_bytes_is_read_again(demo_world, ray_session, tmp_path):
    import os

    from ingest.pipeline import IngestConfig, run_ingest

    xml = bz2.decompress(demo_world.wikipedia_dump.read_bytes())
    dump = tmp_path / "enwiki-latest-pages-articles.xml"
    dump.write_bytes(xml)
    cfg = IngestConfig(wikipedia=[str(dump)], out=str(tmp_path / "out"))
    first = run_ingest(cfg)
    stamp = os.stat(dump)
    assert b" the " in xml
    dump.write_bytes(xml.replace(b" the ", b" thy ", 1))  # the same size ...
    os.utime(dump, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # ... and modification time (cp -p, wget -N)
    assert os.stat(dump).st_size == stamp.st_size and os.stat(dump).st_mtime_ns == stamp.st_mtime_ns
    again = run_ingest(cfg)
    assert first["units_resumed"] == 0 and again["units_resumed"] == 0
    assert run_ingest(cfg)["units_resumed"] == again["units"]  # unchanged since: done


def test_not_utf8_rows_kept_with_replacement_when_asked_and_counted_per_source(ray_session, tmp_path):
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest

    csv = tmp_path / "nli.csv"
    csv.write_bytes(b"sent0,sent1,hard_neg\n"
                    b"A man plays a guitar.,A man plays music.,A woman sleeps.\n"
                    b"A dog runs \xff\xfe fast.,An animal moves.,A cat sleeps.\n"  # line 3: Latin-1 bytes
                    b"Kids play outside.,Children are playing.,Kids sleep inside.\n")
    manifests = {}
    for mode in ("drop", "replace"):
        cfg = PairIngestConfig(sources=[PairSource("simcse_csv", str(csv))], out=str(tmp_path / mode), not_utf8=mode)
        manifests[mode] = run_pair_ingest(cfg)
    dropped = json.loads((tmp_path / "drop" / "nli_triplets" / "_manifest.json").read_text())["sources"][0]
    kept = json.loads((tmp_path / "replace" / "nli_triplets" / "_manifest.json").read_text())["sources"][0]
    assert dropped["dropped"].get("not_utf8") == 2 and dropped["not_utf8_replaced"] == 0
    assert "not_utf8" not in kept["dropped"] and kept["not_utf8_replaced"] == 1
    assert kept["not_utf8_replaced_first_rows"] == ["nli.csv:3"] and kept["accounted"] and dropped["accounted"]
    assert manifests["replace"]["sets"]["nli_triplets"]["rows"] == manifests["drop"]["sets"]["nli_triplets"]["rows"] + 1
