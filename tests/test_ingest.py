"""The ingest job on the demo world and on the real dump samples, with bad input."""

from __future__ import annotations

import bz2
import json
import subprocess
import sys

import pyarrow.dataset as pads
import pytest

from ingest import multistream
from setformat import io as set_io
from setformat import schemas
from ingest.pipeline import IngestConfig, run_ingest
from ingest.wikitext import extractor_loops
from structcse.demo import ENTITY_LINK_THRESHOLD
from tests.conftest import REPO, shared_data

ENWIKI_SAMPLE = ("wikipedia_xml_sample", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")


def read_set(path):
    return pads.dataset(sorted(path.glob("*.parquet")), format="parquet").to_table().to_pylist()


def test_demo_world_every_page_accounted(demo_world, demo_sets):
    out, manifest = demo_sets
    pages = manifest["pages"]
    assert pages["accounted"] is True
    assert pages["in_input"] == demo_world.num_pages
    assert pages["written"] + sum(pages["dropped"].values()) == demo_world.num_pages
    assert pages["dropped"].get("redirect", 0) > 0
    assert pages["dropped"].get("non_article_namespace", 0) > 0
    # the Ray workers run the same extractor loops as this process (the C ones where built)
    assert list(manifest["extractor_loops"]) == [extractor_loops()]
    assert manifest["extractor_loops"][extractor_loops()] >= len(manifest["sources"])  # one per shard
    for name in ("sentences", "entity_pairs", "entities"):
        set_io.check_set(out / name, name)
        set_manifest = set_io.read_manifest(out / name)
        assert set_manifest["rows"] == len(read_set(out / name))
        assert set_manifest["sources"][0]["sha256"]


def test_demo_world_entity_pairs_follow_ease_rules(demo_sets):
    out, manifest = demo_sets
    entities = {row["entity_index"]: row for row in read_set(out / "entities")}
    assert 0 not in entities  # row 0 of the entity table is padding
    pairs = read_set(out / "entity_pairs")
    assert len(pairs) > 100
    threshold = manifest["config"]["entity_link_threshold"]
    linked_on_page: dict[int, set] = {}
    for row in pairs:
        linked_on_page.setdefault(row["page_id"], set()).add(row["positive_qid"])
    for row in pairs:
        positive, negative = entities[row["positive_entity"]], entities[row["negative_entity"]]
        assert (positive["qid"], positive["title"]) == (row["positive_qid"], row["positive_title"])
        assert (negative["qid"], negative["title"]) == (row["negative_qid"], row["negative_title"])
        assert row["negative_qid"] != row["positive_qid"]
        assert set(positive["types"]) & set(negative["types"]), "hard negative must share a P31 type"
        assert row["negative_qid"] not in linked_on_page[row["page_id"]]
        assert positive["link_count"] > threshold
    assert manifest["dropped_links"], "links that make no pair are counted"


def test_demo_world_ingest_is_deterministic(demo_world, demo_sets, tmp_path):
    out, _ = demo_sets
    again = tmp_path / "again"
    run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)], wikidata=[str(demo_world.wikidata_dump)],
                            out=str(again), shard_bytes=60_000, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    for name in ("sentences", "entity_pairs"):
        key = lambda r: (r["page_id"], r["sentence"], r.get("positive_qid", ""))  # noqa: E731
        assert sorted(read_set(out / name), key=key) == sorted(read_set(again / name), key=key)


def test_real_enwiki_sample_accounts_for_all_206_pages(ray_session, tmp_path):
    dump = shared_data(*ENWIKI_SAMPLE)
    manifest = run_ingest(IngestConfig(wikipedia=[str(dump)], out=str(tmp_path / "sample")))
    pages = manifest["pages"]
    assert pages["in_input"] == 206 and pages["accounted"] is True
    # 100 redirects, one of them in namespace 4 (counted as a non-article page); 106 articles.
    assert pages["dropped"]["redirect"] == 99
    assert pages["dropped"]["non_article_namespace"] == 1
    assert pages["written"] == 106 - pages["dropped"].get("no_sentences", 0) - pages["dropped"].get("parse_error", 0)
    assert "entity_pairs" not in manifest["sets"] and manifest["entity_pairs_skipped"]
    sentences = read_set(tmp_path / "sample" / "sentences")
    assert len(sentences) > 5000
    assert not any("[[" in s["sentence"] or "{{" in s["sentence"] for s in sentences)


def rebuild_multistream(pages_xml: list[bytes], header: bytes, path, pages_per_stream=100):
    """Write a real multistream dump + index from page XML blobs."""
    import re

    body, index_lines = [bz2.compress(header)], []
    offset = len(body[0])
    for i in range(0, len(pages_xml), pages_per_stream):
        chunk = pages_xml[i : i + pages_per_stream]
        for page in chunk:
            page_id = re.search(rb"<id>(\d+)</id>", page).group(1).decode()
            title = re.search(rb"<title>([^<]*)</title>", page).group(1).decode()
            index_lines.append(f"{offset}:{page_id}:{title}")
        stream = bz2.compress(b"".join(chunk))
        body.append(stream)
        offset += len(stream)
    body.append(bz2.compress(b"</mediawiki>\n"))
    path.write_bytes(b"".join(body))
    index = path.with_name(path.name[: -len(".xml.bz2")] + "-index.txt.bz2")
    index.write_bytes(bz2.compress(("\n".join(index_lines) + "\n").encode()))
    return path


def test_real_sample_as_multistream_matches_plain_file(ray_session, tmp_path):
    import re

    dump = shared_data(*ENWIKI_SAMPLE)
    xml = bz2.decompress(dump.read_bytes())
    header = xml[: xml.index(b"<page>")]
    pages_xml = re.findall(rb"<page>.*?</page>\s*", xml, flags=re.S)
    assert len(pages_xml) == 206
    multi = rebuild_multistream(pages_xml, header, tmp_path / "enwiki-sample-pages-articles-multistream.xml.bz2")
    assert len(multistream.plan_shards([str(multi)], shard_bytes=1)) == 3
    plain = run_ingest(IngestConfig(wikipedia=[str(dump)], out=str(tmp_path / "plain")))
    multi_manifest = run_ingest(IngestConfig(wikipedia=[str(multi)], out=str(tmp_path / "multi"), shard_bytes=1))
    assert multi_manifest["pages"] == plain["pages"]
    assert multi_manifest["sets"]["sentences"]["rows"] == plain["sets"]["sentences"]["rows"]


def test_truncated_stream_and_bad_wikidata_line_are_counted(demo_world, ray_session, tmp_path):
    data = demo_world.wikipedia_dump.read_bytes()
    index_rows = multistream.read_index(str(demo_world.wikipedia_index))
    last_offset = max(offset for offset, _, _ in index_rows)
    lost_pages = sum(1 for offset, _, _ in index_rows if offset == last_offset)
    broken = tmp_path / "broken-pages-articles-multistream.xml.bz2"
    broken.write_bytes(data[: last_offset + (len(data) - last_offset) // 2])  # cut the last page stream in half
    (tmp_path / "broken-pages-articles-multistream-index.txt.bz2").write_bytes(demo_world.wikipedia_index.read_bytes())

    lines = bz2.decompress(demo_world.wikidata_dump.read_bytes()).decode().split("\n")
    lines.insert(3, '{"type": "item", "id": "Q9999999", "labels": {not json at all},')
    wikidata = tmp_path / "wikidata-bad.json"
    wikidata.write_text("\n".join(lines))

    manifest = run_ingest(IngestConfig(wikipedia=[str(broken)], wikidata=[str(wikidata)], out=str(tmp_path / "out")))
    assert manifest["pages"]["dropped"]["corrupt_stream"] == lost_pages
    assert manifest["pages"]["in_input"] == demo_world.num_pages and manifest["pages"]["accounted"]
    assert "ends before" in manifest["sources"][0]["quarantined"][0]["error"]
    wikidata_counts = manifest["wikidata"][0]
    assert wikidata_counts["skipped"]["bad_json"] == 1 and wikidata_counts["accounted"]
    bad_offset = sum(len(line) + 1 for line in lines[:3])
    assert wikidata_counts["quarantined_first"][0]["offset"] == bad_offset
    assert manifest["sets"]["entity_pairs"]["rows"] > 0


def test_missing_inputs_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.xml.bz2"):
        run_ingest(IngestConfig(wikipedia=[str(tmp_path / "nowhere.xml.bz2")], out=str(tmp_path / "o")))
    bad_index = tmp_path / "x-pages-articles-multistream-index.txt.bz2"
    bad_index.write_bytes(bz2.compress(b"not an index line\n"))
    with pytest.raises(multistream.DumpFormatError, match="offset:page_id:title"):
        multistream.read_index(str(bad_index))


def test_schema_check_names_the_missing_column(demo_sets, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out, _ = demo_sets
    table = pads.dataset(sorted((out / "entity_pairs").glob("*.parquet"))).to_table().drop_columns(["negative_entity"])
    (tmp_path / "pairs").mkdir()
    pq.write_table(table, tmp_path / "pairs" / "part.parquet")
    with pytest.raises(schemas.SchemaError, match="negative_entity"):
        set_io.check_set(tmp_path / "pairs", "entity_pairs")
    pq.write_table(pa.table({"sentence": [1, 2]}), tmp_path / "pairs" / "part.parquet")
    with pytest.raises(schemas.SchemaError, match="'sentence' has type int64"):
        set_io.check_set(tmp_path / "pairs", "sentences", required=["sentence"])


def test_cli_help_and_missing_file():
    help_out = subprocess.run([sys.executable, "-m", "ingest", "--help"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
    assert help_out.returncode == 0 and "--wikipedia" in help_out.stdout
    missing = subprocess.run([sys.executable, "-m", "ingest", "--wikipedia", "/nonexistent/dump.xml.bz2",
                              "--out", "/tmp/never"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "/nonexistent/dump.xml.bz2" in missing.stderr


# ---------------------------------------------------------------- dump scale: issue 3


def test_shards_balance_compressed_bytes_over_many_files(demo_world):
    files = [str(demo_world.wikipedia_dump), str(demo_world.dewiki_dump)]
    streams = [len(multistream.stream_ranges(multistream.read_index(str(i)), p.stat().st_size))
               for i, p in ((demo_world.wikipedia_index, demo_world.wikipedia_dump),
                            (demo_world.dewiki_index, demo_world.dewiki_dump))]
    full = multistream.stream_ranges(multistream.read_index(str(demo_world.wikipedia_index)),
                                     demo_world.wikipedia_dump.stat().st_size)
    counted = multistream.count_index_streams(str(demo_world.wikipedia_index), demo_world.wikipedia_dump.stat().st_size)
    assert [(r.start, r.end, len(r.page_ids)) for r in full] == [(r.start, r.end, r.pages) for r in counted]
    one_each = multistream.plan_shards(files, shard_bytes=1)
    assert len(one_each) == sum(streams) and [s.shard_id for s in one_each] == list(range(sum(streams)))
    assert [s.wiki for s in one_each] == ["enwiki"] * streams[0] + ["dewiki"] * streams[1]
    target = 2 * max(s.compressed_bytes for s in one_each)
    grouped = multistream.plan_shards(files, shard_bytes=target)
    for path in files:  # every stream of every file in exactly one shard, in order
        mine = [s for s in grouped if s.path == path]
        assert [r for s in mine for r in s.streams] == [r for s in one_each if s.path == path for r in s.streams]
        assert all(s.compressed_bytes >= target for s in mine[:-1])


def corrupt_middle_stream(src, dst):
    """Copy a multistream dump (+ index) with garbage in the middle of its middle page stream."""
    rows = multistream.read_index(str(src[1]))
    ranges = multistream.stream_ranges(rows, src[0].stat().st_size)
    middle = ranges[len(ranges) // 2]
    data = bytearray(src[0].read_bytes())
    at = (middle.start + middle.end) // 2
    data[at : at + 64] = bytes(64)
    dst.write_bytes(bytes(data))
    dst.with_name(dst.name[: -len(".xml.bz2")] + "-index.txt.bz2").write_bytes(src[1].read_bytes())
    return middle


def test_corrupt_middle_stream_is_quarantined_and_counted(demo_world, demo_sets, ray_session, tmp_path):
    dump = tmp_path / "enwiki-20260101-pages-articles-multistream.xml.bz2"
    middle = corrupt_middle_stream((demo_world.wikipedia_dump, demo_world.wikipedia_index), dump)
    manifest = run_ingest(IngestConfig(wikipedia=[str(dump)], out=str(tmp_path / "out"), shard_bytes=1))
    pages = manifest["pages"]
    assert pages["accounted"] and pages["in_input"] == demo_world.num_pages
    assert pages["dropped"]["corrupt_stream"] == len(middle.page_ids)
    (quarantined,) = manifest["sources"][0]["quarantined"]
    assert (quarantined["offset"], quarantined["end"], quarantined["pages"]) == (middle.start, middle.end,
                                                                             len(middle.page_ids))
    with open(quarantined["copy"], "rb") as f:
        assert f.read() == dump.read_bytes()[middle.start : middle.end]
    # every other page is written exactly as in the clean run
    clean = {(r["page_id"], r["sentence_index"]): r["sentence"] for r in read_set(demo_sets[0] / "sentences")}
    damaged = {(r["page_id"], r["sentence_index"]): r["sentence"] for r in read_set(tmp_path / "out" / "sentences")}
    lost = {key for key in clean if key[0] in set(middle.page_ids)}
    assert lost and damaged == {k: v for k, v in clean.items() if k not in lost}


def parquet_files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))
            if "_work" not in p.parts}


@pytest.mark.end_to_end
def test_killed_job_reruns_to_byte_identical_sets(demo_world, demo_sets, ray_session, tmp_path):
    import os
    import signal
    import time

    import ray

    out = tmp_path / "killed"
    command = [sys.executable, "-m", "ingest", "--wikipedia", str(demo_world.wikipedia_dump),
               "--wikidata", str(demo_world.wikidata_dump), "--out", str(out), "--shard-bytes", "1",
               "--entity-link-threshold", str(ENTITY_LINK_THRESHOLD)]
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    job = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = out / "_work" / "done"
    deadline = time.time() + 120
    while time.time() < deadline and job.poll() is None and not (done.exists() and any(done.glob("*.json"))):
        time.sleep(0.05)
    assert job.poll() is None, "the job finished before it could be killed: " + job.stderr.read().decode()[-2000:]
    job.send_signal(signal.SIGKILL)
    job.wait(timeout=60)
    finished_before_kill = len(list(done.glob("*.json")))
    assert not (out / "manifest.json").exists()

    manifest = run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)],
                                       wikidata=[str(demo_world.wikidata_dump)], out=str(out), shard_bytes=1,
                                       entity_link_threshold=ENTITY_LINK_THRESHOLD))
    assert manifest["units_resumed"] >= finished_before_kill >= 1
    clean, rerun = parquet_files(demo_sets[0]), parquet_files(out)
    assert sorted(rerun) == sorted(clean)
    assert [name for name in clean if clean[name] != rerun[name]] == []


def test_a_rerun_with_other_shard_sizes_keeps_no_rows_of_the_first(demo_world, demo_sets, ray_session, tmp_path):
    """Ingest into a folder an earlier run wrote with other shard sizes: the earlier run's unit files are
    removed (counted), not read as part of the new sets (they once gave every sentence twice)."""
    import shutil

    out = tmp_path / "again"
    shutil.copytree(demo_sets[0], out)  # shard_bytes=1: one shard per stream; one Wikidata range
    manifest = run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)],
                                       wikidata=[str(demo_world.wikidata_dump)], out=str(out),
                                       wikidata_range_bytes=150_000, entity_link_threshold=ENTITY_LINK_THRESHOLD))
    assert manifest["units"] >= 2 and manifest["stale_unit_files_removed"] > 0
    clean, rerun = parquet_files(demo_sets[0]), parquet_files(out)
    assert manifest["sets"]["sentences"]["rows"] == len(read_set(out / "sentences")) == len(
        read_set(demo_sets[0] / "sentences"))
    assert sorted(r["qid"] for r in read_set(out / "wikidata")) == sorted(
        r["qid"] for r in read_set(demo_sets[0] / "wikidata"))
    for name in ("entities/entities.parquet", *[n for n in clean if n.startswith("entity_pairs/")]):
        assert rerun[name] == clean[name], name


@pytest.mark.end_to_end
def test_wikidata_in_each_compression_gives_the_same_sets(demo_world, demo_sets, ray_session, tmp_path):
    import gzip

    text = bz2.decompress(demo_world.wikidata_dump.read_bytes())
    plain = tmp_path / "wikidata-20260101-all.json"
    plain.write_bytes(text)
    gz = tmp_path / "wikidata-20260101-all.json.gz"
    gz.write_bytes(gzip.compress(text, mtime=0))
    clean = parquet_files(demo_sets[0])
    for dump in (plain, gz):
        out = tmp_path / dump.name.replace(".", "_")
        manifest = run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)], wikidata=[str(dump)],
                                           out=str(out), shard_bytes=1, wikidata_range_bytes=150_000,
                                           entity_link_threshold=ENTITY_LINK_THRESHOLD))
        assert manifest["wikidata"][0]["accounted"]
        assert manifest["wikidata"][0]["ranges"] > (1 if dump is plain else 0)
        files = parquet_files(out)
        for name in ("entities/entities.parquet", *[n for n in clean if n.startswith("entity_pairs/")]):
            assert files[name] == clean[name], name
        rows = sorted(read_set(out / "wikidata"), key=lambda r: r["qid"])
        assert rows == sorted(read_set(demo_sets[0] / "wikidata"), key=lambda r: r["qid"])


def test_redirects_and_sitelinks_of_two_wikis_resolve_to_one_qid(ray_session, tmp_path):
    import ray

    from ingest.entity_pairs import resolve_mentions
    from ingest.shuffle import Shuffle

    wikidata = ray.data.from_items([
        {"qid": "Q1726", "labels": [], "claims": [],
         "sitelinks": [{"wiki": "enwiki", "title": "Munich"}, {"wiki": "dewiki", "title": "München"}]},
        {"qid": "Q64", "labels": [], "claims": [], "sitelinks": [{"wiki": "enwiki", "title": "Berlin"}]},
    ])
    redirects = ray.data.from_items([
        {"wiki": "dewiki", "title": "Muenchen", "target": "München"},
        {"wiki": "enwiki", "title": "Munchen", "target": "Munich"},
        {"wiki": "enwiki", "title": "Nowhere", "target": "No item"},
    ])
    mentions = ray.data.from_items([
        {"wiki": w, "title": t, "page_id": i, "sentence_index": 0}
        for i, (w, t) in enumerate([("enwiki", "Munich"), ("dewiki", "München"), ("dewiki", "Muenchen"),
                                    ("enwiki", "Munchen"), ("dewiki", "Munich"), ("enwiki", "Nowhere"),
                                    ("enwiki", "Berlin"), ("dewiki", "Berlin")])
    ])
    shuffle = Shuffle.in_work(str(tmp_path / "_work"))
    rows = resolve_mentions(wikidata, redirects, mentions, ["enwiki", "dewiki"], shuffle).take_all()
    shuffle.remove()
    qid_of = {r["page_id"]: r["qid"] for r in rows}
    assert qid_of == {0: "Q1726", 1: "Q1726", 2: "Q1726", 3: "Q1726", 4: None, 5: None, 6: "Q64", 7: None}


def test_multilingual_ingest_shares_entities_across_wikis(demo_world, ray_session, tmp_path):
    world = json.loads((demo_world.root / "world.json").read_text())
    out = tmp_path / "multi"
    manifest = run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump), str(demo_world.dewiki_dump)],
                                       wikidata=[str(demo_world.wikidata_dump)], out=str(out), shard_bytes=1,
                                       entity_link_threshold=ENTITY_LINK_THRESHOLD))
    assert [s["wiki"] for s in manifest["sources"]] == ["enwiki", "dewiki"]
    assert manifest["config"]["wikis"] == ["enwiki", "dewiki"]
    assert manifest["pages"]["accounted"] and manifest["links_accounted"]
    assert manifest["pages"]["in_input"] == demo_world.num_pages + demo_world.dewiki_num_pages
    pairs = read_set(out / "entity_pairs")
    wikis_of: dict[str, set] = {}
    for row in pairs:
        wikis_of.setdefault(row["positive_qid"], set()).add(row["wiki"])
    english = {e["qid"]: e["title"] for e in world["entities"]} if isinstance(world["entities"], list) else {}
    renamed = [q for q, t in world["dewiki_titles"].items() if english.get(q, t) != t]
    assert renamed, "the demo world has German titles that differ from the English ones"
    assert any(wikis_of.get(q) == {"enwiki", "dewiki"} for q in renamed), \
        "an entity with different en/de titles gets pairs from sentences of both wikis"
    entities = read_set(out / "entities")
    assert len({e["qid"] for e in entities}) == len(entities)


def test_pairs_for_entities_counts_repeats_caps_and_untyped_entities():
    import random

    import pyarrow as pa

    from ingest.entity_pairs import MENTIONS, VOCABULARY_ROWS, _pairs_for_entities, _slot_side

    entities = [  # Q1: two types, one with no other member; Q2: only that type; Q3 is not in the vocabulary
        {"qid": "Q1", "entity_index": 1, "title": "One", "types": ["Q5", "Q99"]},
        {"qid": "Q2", "entity_index": 2, "title": "Two", "types": ["Q99"]},
    ]
    mentions = [{"qid": "Q1", "wiki": "enwiki", "page_id": p, "sentence_index": s} for p in range(4) for s in range(2)]
    mentions += [mentions[0], {"qid": "Q2", "wiki": "enwiki", "page_id": 9, "sentence_index": 0},
                 {"qid": "Q3", "wiki": "enwiki", "page_id": 9, "sentence_index": 1}]
    type_sizes = {"Q5": 7, "Q99": 1}

    def pairs_of(mentions, entities=entities, seed=3):
        return _pairs_for_entities(pa.Table.from_pylist(mentions, schema=MENTIONS),
                                   pa.Table.from_pylist(entities, schema=VOCABULARY_ROWS), cap=5, seed=seed,
                                   type_sizes=type_sizes)

    def slots_of(pairs):  # step 5's requests: 4 candidate slots per kept pair, drawn from its draw
        requests = _slot_side(pairs, (0, 4)).to_pylist()
        return [tuple(r["slot"] for r in requests[i:i + 4]) for i in range(0, len(requests), 4)]

    out = pairs_of(mentions)
    assert len(out) == len(mentions)  # every mention is a pair or a counted drop
    dropped = [r["dropped"] for r in out.to_pylist()]
    assert dropped.count("same_entity_twice_in_a_sentence") == 1
    assert dropped.count("entity_pair_cap") == 8 - 5
    assert dropped.count("no_other_entity_of_its_type") == 1  # Q2
    assert dropped.count("entity_below_link_threshold_or_untyped") == 1  # Q3
    kept = [r for r in out.to_pylist() if r["dropped"] is None]
    assert len(kept) == 5 and len({(r["page_id"], r["sentence_index"]) for r in kept}) == 5
    for r in kept:
        assert (r["positive_entity"], r["positive_title"], r["negative_type"], r["type_size"]) == (1, "One", "Q5", 7)
    slots = slots_of(out)
    assert len(slots) == 5 and all(0 <= s < 7 for pair in slots for s in pair)
    assert len(set(slots)) > 1
    assert slots_of(out)[1:] == slots_of(out.filter(pa.array([r["dropped"] is None for r in out.to_pylist()]))
                                         .slice(1))  # a pair's slots are its own, whatever batch it is in
    # the same pairs and draws whatever order the rows come in; another seed samples others
    shuffled, shuffled_entities = mentions[:], entities[::-1]
    random.Random(0).shuffle(shuffled)
    assert pairs_of(shuffled, shuffled_entities).equals(out)
    assert slots_of(pairs_of(mentions, seed=4)) != slots


# ---------------------------------------------------------------- pass 1 on Ray Data or plain tasks


def test_pass1_ray_data_read_and_plain_tasks_write_the_same_bytes(demo_world, demo_sets, ray_session, tmp_path):
    """(Its resume after a lost unit, and an unknown --pass1: python bench/ingest.py --check-pass1.)"""
    def every_parquet(root):  # the sets and pass 1's work files (mentions, redirects)
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}

    def ingest(out, pass1):
        return run_ingest(IngestConfig(wikipedia=[str(demo_world.wikipedia_dump)],
                                       wikidata=[str(demo_world.wikidata_dump)], out=str(out), shard_bytes=1,
                                       pass1=pass1, entity_link_threshold=ENTITY_LINK_THRESHOLD))

    outputs = {demo_sets[1]["pass1"]: demo_sets[0]}  # the fixture ran the default way
    manifest = ingest(tmp_path / "data", "data")
    assert manifest["pass1"] == "data" and manifest["units_resumed"] == 0
    assert manifest["pages"] == demo_sets[1]["pages"] and manifest["units"] == demo_sets[1]["units"]
    outputs["data"] = tmp_path / "data"
    if "tasks" not in outputs:
        assert ingest(tmp_path / "tasks", "tasks")["pass1"] == "tasks"
        outputs["tasks"] = tmp_path / "tasks"
    by_data, by_tasks = every_parquet(outputs["data"]), every_parquet(outputs["tasks"])
    assert sorted(by_data) == sorted(by_tasks) and any(name.startswith("_work/mentions/") for name in by_data)
    assert [name for name in by_data if by_data[name] != by_tasks[name]] == []


def test_ingest_defaults_are_the_ease_papers():
    cfg = IngestConfig(wikipedia=["x.xml.bz2"], out="o")
    assert cfg.entity_link_threshold == 10  # EASE §3.1: entities "that appear more than ten times as hyperlinks"
    assert cfg.type_property == "P31"  # EASE §3.2: hard negatives share an "instance of" type
    help_text = subprocess.run([sys.executable, "-m", "ingest", "--help"], cwd=REPO, capture_output=True, text=True,
                               timeout=60).stdout
    assert "default 10" in help_text


def test_second_round_page_filter_keeps_every_page_of_a_pair(ray_session):
    """The second round's linked side keeps every linked row of a page with a pair (no false negatives) and
    drops most of the others."""
    import numpy as np
    import pyarrow as pa

    from ingest.entity_pairs import _in_page_filter, _linked_side, _page_filter

    pairs = ray_session.data.from_arrow(pa.table({"wiki": ["enwiki"] * 300, "page_id": np.arange(0, 3000, 10)}))
    pages = _page_filter(pairs, 300)
    assert len(pages) == 1 << 13  # 16 bits per page at least: 2^16 bits
    linked = pa.table({"wiki": ["enwiki"] * 6000, "page_id": np.arange(6000) // 2, "entity": np.arange(6000)})
    kept = _linked_side(linked, pages)
    on_pair_pages = np.arange(6000)[(np.arange(6000) // 2) % 10 == 0]
    assert set(on_pair_pages.tolist()) <= set(kept["entity_index"].to_pylist())
    assert len(kept) < len(on_pair_pages) + 600  # the others: at most ~1/16 of them kept
    assert _in_page_filter(pa.table({"wiki": ["dewiki"], "page_id": [0]}), pages).dtype == bool
    assert len(_linked_side(linked)) == 6000
