"""Tests of ingest.wikidata: parallel, line-aligned ranges of a Wikidata JSON
dump (plain, gzip single/multi-member, bz2 single/multi-stream), the row
format and the counts. No Ray needed."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import zlib
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
import pytest

from setformat import schemas
from ingest.wikidata import (
    DEFAULT_PROPERTIES,
    MULTILINGUAL_EASE_WIKIS,
    DumpError,
    EntitySelection,
    WikidataRange,
    WikidataStats,
    entity_row,
    iter_range_lines,
    plan_ranges,
    read_range,
)
from tests.conftest import shared_data

SAMPLE = ("wikidata_json_sample", "wikidata-dump-first50lines.json")


# --------------------------------------------------------------------------
# building dumps


def statement(prop, value=None, *, rank="normal", snaktype="value", kind="wikibase-entityid"):
    snak = {"snaktype": snaktype, "property": prop}
    if snaktype == "value":
        if kind == "wikibase-entityid" and isinstance(value, str):
            value = {"entity-type": "item", "numeric-id": int(value[1:]), "id": value}
        snak["datavalue"] = {"value": value, "type": kind}
    return {"mainsnak": snak, "type": "statement", "rank": rank}


def item(qid, *, labels=None, sitelinks=None, claims=None):
    return {
        "type": "item",
        "id": qid,
        "labels": {k: {"language": k, "value": v} for k, v in (labels or {}).items()} or [],
        "descriptions": [],
        "aliases": [],
        "claims": claims or [],
        "sitelinks": {w: {"site": w, "title": t, "badges": []} for w, t in (sitelinks or {}).items()} or [],
    }


# An item whose P31 has a deprecated statement, a somevalue P17 and a novalue P27.
DEPRECATED = item(
    "Q900001",
    labels={"en": "Deprecated thing", "de": "Ding", "fr": "Chose"},
    sitelinks={"enwiki": "Deprecated thing"},
    claims={
        "P31": [statement("P31", "Q111", rank="deprecated"), statement("P31", "Q5"), statement("P31", "Q6", rank="preferred")],
        "P17": [statement("P17", snaktype="somevalue"), statement("P17", "Q183")],
        "P27": [statement("P27", snaktype="novalue")],
        "P99": [statement("P99", "Q1")],
    },
)
PROPERTY = {"type": "property", "datatype": "wikibase-item", "id": "P900", "labels": {"en": {"language": "en", "value": "p"}}, "claims": []}
LEXEME = {"type": "lexeme", "id": "L900", "lemmas": {"en": {"language": "en", "value": "run"}}, "lexicalCategory": "Q24905", "claims": []}
NO_SITELINK = item("Q900002", labels={"en": "Only French"}, sitelinks={"frwiki": "Seulement"}, claims={"P31": [statement("P31", "Q5")]})
TWO_WIKIS = item(
    "Q900003",
    labels={"de": "Zwei", "en": "Two"},
    sitelinks={"dewiki": "Zwei (Wiki)", "enwiki": "Two (wiki)"},
    claims={"P17": [statement("P17", "Q183")], "P31": [statement("P31", "Q515")]},
)
EMPTY_MAPS = item("Q900004", sitelinks={"enwiki": "Empty maps"})  # labels/claims serialised as []
BAD_JSON = b'{"type":"item","id":"Q9000'
NO_TYPE = b'{"id":"Q900005","labels":{}}'
# A line that holds a whole valid gzip member: a false member start in a
# stored (level 0) gzip member. Not JSON, so it is a bad line.
EMBEDDED = b"junk " + gzip.compress(b'{"fake":1}\n', mtime=0) + b" junk"
assert b"\n" not in EMBEDDED

SYNTHETIC = [  # (after sample entity number, raw line without ",")
    (3, json.dumps(DEPRECATED).encode()),
    (7, json.dumps(PROPERTY).encode()),
    (12, BAD_JSON),
    (20, json.dumps(NO_SITELINK).encode()),
    (25, json.dumps(LEXEME).encode()),
    (30, NO_TYPE),
    (33, json.dumps(TWO_WIKIS).encode()),
    (40, EMBEDDED),
    (45, json.dumps(EMPTY_MAPS, ensure_ascii=False).encode()),
]
BAD_LINES = [BAD_JSON, NO_TYPE, EMBEDDED]


def dump_lines(sample_entities: list[bytes]) -> list[bytes]:
    """The dump's lines with their "\\n": "[", entities with ",", the last one without, "]"."""
    entities = []
    for n, entity in enumerate(sample_entities, start=1):
        entities.append(entity)
        entities.extend(raw for after, raw in SYNTHETIC if after == n)
    lines = [b"[\n"] + [e + b",\n" for e in entities[:-1]] + [entities[-1] + b"\n", b"]\n"]
    return lines


def write_dumps(directory, lines: list[bytes]) -> dict[str, str]:
    data = b"".join(lines)
    paths = {}

    def put(name, blob):
        path = directory / name
        path.write_bytes(blob)
        paths[name] = str(path)

    put("plain.json", data)
    put("single.json.gz", gzip.compress(data, compresslevel=6, mtime=0))
    put("members7.json.gz", b"".join(gzip.compress(b"".join(lines[i : i + 7]), compresslevel=1, mtime=0) for i in range(0, len(lines), 7)))
    # Like the real dump: "[" member, batches without their final ",\n", tiny ",\n" members between, "\n]" at the end.
    body = [line.rstrip(b"\n").removesuffix(b",") for line in lines[1:-1]]
    batches = [b",\n".join(body[i : i + 9]) for i in range(0, len(body), 9)]
    members = [b"[\n"]
    for i, batch in enumerate(batches):
        if i:
            members.append(b",\n")
        members.append(batch)
    members.append(b"\n]\n")
    put("dumplike.json.gz", b"".join(gzip.compress(m, compresslevel=1, mtime=0) for m in members))
    put("single.json.bz2", bz2.compress(data, 1))  # 100 kB blocks: many blocks
    cuts = [0, 333_333, 1_000_001, 1_000_002, 2_500_000, len(data)]  # streams split mid-line
    put("multi.json.bz2", b"".join(bz2.compress(data[a:b], 1) for a, b in pairwise(cuts)))
    return paths


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    sample = shared_data(*SAMPLE).read_bytes()
    entities = [line.rstrip(b",") for line in sample.split(b"\n") if line not in (b"", b"[", b"]")]
    lines = dump_lines(entities)
    directory = tmp_path_factory.mktemp("wikidata_dump")
    paths = write_dumps(directory, lines)
    return {"lines": lines, "data": b"".join(lines), "paths": paths, "index_dir": str(directory / "index"),
            "sample_qids": [json.loads(e)["id"] for e in entities]}


FORMATS = ["plain.json", "single.json.gz", "members7.json.gz", "dumplike.json.gz", "single.json.bz2", "multi.json.bz2"]


def read_all(ranges, selection=None):
    selection = selection or EntitySelection()
    stats = WikidataStats()
    rows = [row for rng in ranges for row in read_range(rng, selection, stats)]
    return rows, stats


def one_range(path, index_dir):
    ranges = plan_ranges([path], 1 << 40, index_dir)
    assert len(ranges) == 1
    return ranges


_WHOLE: dict[str, tuple] = {}


def read_whole(path, index_dir):
    """Rows and stats of a file read as one range (cached: the reference)."""
    if path not in _WHOLE:
        _WHOLE[path] = read_all(one_range(path, index_dir))
    return _WHOLE[path]


def same_stats(stats, whole_stats):
    """Equal counts and quarantined lines. A gz entry's offset is relative to
    its range's first member, so for gz only path and snippet must match
    (test_bad_lines_are_quarantined_with_their_offsets checks the offsets)."""
    a, b = stats.as_dict(), whole_stats.as_dict()
    if any("member_offset" in e for e in a["quarantined"] + b["quarantined"]):
        for d in (a, b):
            d["quarantined"] = [(e["path"], e["reason"], e["snippet"]) for e in d["quarantined"]]
    assert a == b


def lines_of(ranges, with_offsets=True):
    """The raw lines the ranges own, concatenated in range order (no JSON
    parsing: cheap enough for sweeps)."""
    return [(o, l) if with_offsets else l for rng in ranges for o, l in iter_range_lines(rng)]


def assert_counts_add_up(stats):
    assert stats.lines == stats.written + sum(stats.skipped.values())


# --------------------------------------------------------------------------
# ranges of every format


@pytest.mark.parametrize("name", FORMATS)
def test_ranges_give_the_rows_of_one_range(dump, name):
    path = dump["paths"][name]
    whole, whole_stats = read_whole(path, dump["index_dir"])
    target = 150_000 if name.endswith(".gz") else 400_000
    ranges = plan_ranges([path], target, dump["index_dir"])
    if name == "single.json.gz":  # one member: no split point
        assert [(r.start, r.end) for r in ranges] == [(0, os.path.getsize(path))]
    else:
        assert len(ranges) >= 3, ranges
    assert [r.range_id for r in ranges] == list(range(len(ranges)))
    assert all(a.end == b.start for a, b in pairwise(ranges))
    rows, stats = read_all(ranges)
    assert rows == whole
    same_stats(stats, whole_stats)
    assert_counts_add_up(stats)

    # 49 sample items (all with enwiki) + DEPRECATED, TWO_WIKIS, EMPTY_MAPS
    assert stats.written == 52
    assert [r["qid"] for r in rows] == [q for q in dump["sample_qids"][:3]] + ["Q900001"] + dump["sample_qids"][3:33] + [
        "Q900003"
    ] + dump["sample_qids"][33:45] + ["Q900004"] + dump["sample_qids"][45:]
    assert dict(stats.skipped) == {"bad_json": 3, "non_item": 2, "no_sitelink": 1}
    assert stats.lines == 49 + len(SYNTHETIC)
    assert stats.quarantined_count == 3
    pa.Table.from_pylist(rows, schema=schemas.WIKIDATA)  # the fixed output schema accepts the rows


@pytest.mark.parametrize("name", FORMATS)
def test_bad_lines_are_quarantined_with_their_offsets(dump, name):
    path = dump["paths"][name]
    ranges = plan_ranges([path], 150_000 if name.endswith(".gz") else 400_000, dump["index_dir"])
    _, stats = read_all(ranges)
    data = dump["data"]
    compressed = Path(path).read_bytes()
    entries = stats.quarantined
    assert [e["snippet"][:10] for e in entries] == [b.decode("utf-8", "replace")[:10] for b in BAD_LINES]
    for entry, bad in zip(entries, BAD_LINES):
        assert entry["path"] == path
        assert entry["reason"].startswith("bad_json")
        assert len(entry["snippet"]) <= 200
        if name.endswith(".gz"):
            # offset = member_offset + offset in the data decompressed from member_offset
            start = entry["member_offset"]
            assert start in {r.start for r in ranges}
            tail = gzip.decompress(compressed[start:])
            assert tail[entry["offset"] - start :].startswith(bad + b",\n")
        else:
            assert "member_offset" not in entry
            assert data[entry["offset"] :].startswith(bad + b",\n")
            assert data[entry["offset"] - 1 : entry["offset"]] == b"\n"
    if name == "single.json.gz":  # one member from 0: a plain uncompressed offset
        assert [e["offset"] for e in entries] == [data.index(b) for b in BAD_LINES]


def test_plain_and_bz2_any_split_point_loses_and_duplicates_nothing(dump, tmp_path):
    """Two ranges [0, s) and [s, size) for every s: at a line start, mid-line,
    on the "\\n", at 0 and at the end."""
    lines = [b"[\n"] + [json.dumps(item(f"Q{i}", labels={"en": "x" * (i % 5)}, sitelinks={"enwiki": f"T{i}"})).encode() + b",\n" for i in range(1, 8)]
    lines += [b"not json at all,\n", json.dumps(item("Q99", sitelinks={"enwiki": "Last"})).encode() + b"\n", b"]"]  # no final "\n"
    data = b"".join(lines)
    plain = tmp_path / "small.json"
    plain.write_bytes(data)
    packed = tmp_path / "small.json.bz2"
    packed.write_bytes(bz2.compress(data[:500]) + bz2.compress(data[500:]))
    index_dir = str(tmp_path / "index")
    for path, step in ((str(plain), 1), (str(packed), 11)):
        (whole_range,) = plan_ranges([path], 1 << 40, index_dir)
        whole, whole_stats = read_all([whole_range])
        assert [r["qid"] for r in whole] == [f"Q{i}" for i in range(1, 8)] + ["Q99"]
        assert whole_stats.skipped == {"bad_json": 1}
        whole_lines = lines_of([whole_range])
        assert [l for _, l in whole_lines] == lines
        for s in list(range(0, len(data) + 1, step)) + [len(data)]:
            first = WikidataRange(0, path, whole_range.compression, 0, s, whole_range.index_path)
            second = WikidataRange(1, path, whole_range.compression, s, len(data), whole_range.index_path)
            assert lines_of([first, second]) == whole_lines, (path, s)
            if s % 50 == 0:
                rows, stats = read_all([first, second])
                assert rows == whole, (path, s)
                assert stats.as_dict() == whole_stats.as_dict(), (path, s)


@pytest.mark.parametrize("name", ["plain.json", "single.json.bz2", "multi.json.bz2", "members7.json.gz", "dumplike.json.gz"])
def test_many_target_sizes(dump, name):
    """Every line of the file, once, in order, whatever the target size."""
    path = dump["paths"][name]
    gz = name.endswith(".gz")
    expected = dump["lines"] if not gz else b"".join(dump["lines"]).splitlines(keepends=True)
    if not gz:
        offsets = [0]
        for line in expected[:-1]:
            offsets.append(offsets[-1] + len(line))
        expected = list(zip(offsets, expected))
    size = os.path.getsize(path) if gz else len(dump["data"])
    counts = set()
    # (a bz2 range costs ~25 ms here, one block decompressed at its seek)
    targets = (1, 997, 65_536, 131_071, 77_777) if gz else (131_071, 77_777) if name == "plain.json" else ()
    for target in targets + (size // 2 + 1, size // 3 + 7, 254_321):
        ranges = plan_ranges([path], target, dump["index_dir"])
        counts.add(len(ranges))
        got = lines_of(ranges, with_offsets=not gz)
        assert got == expected, target
    assert len(counts) >= 3


def test_plan_numbers_ranges_across_files_and_round_trips_json(dump):
    paths = [dump["paths"]["plain.json"], dump["paths"]["members7.json.gz"], dump["paths"]["single.json.bz2"]]
    ranges = plan_ranges(paths, 1_000_000, dump["index_dir"])
    assert [r.range_id for r in ranges] == list(range(len(ranges)))
    assert {r.compression for r in ranges} == {"none", "gz", "bz2"}
    assert [r.path for r in ranges] == sorted((r.path for r in ranges), key=paths.index)
    for r in ranges:
        again = WikidataRange.from_json(r.to_json())
        assert again == r
        json.loads(r.to_json())
    assert all((r.index_path is not None) == (r.compression == "bz2") for r in ranges)
    with pytest.raises(ValueError):
        plan_ranges(paths, 0, dump["index_dir"])


# --------------------------------------------------------------------------
# gz specifics


def member_starts(blob: bytes) -> list[tuple[int, bytes]]:
    """(compressed offset, decompressed data) of every member."""
    out, pos = [], 0
    while pos < len(blob):
        d = zlib.decompressobj(31)
        data = d.decompress(blob[pos:])
        out.append((pos, data))
        pos = len(blob) - len(d.unused_data)
    return out


def test_gz_splits_only_at_members_that_start_lines(dump):
    path = dump["paths"]["dumplike.json.gz"]
    blob = Path(path).read_bytes()
    members = member_starts(blob)
    line_starts = {off for (off, _), (_, prev) in zip(members[1:], members) if prev.endswith(b"\n")}
    mid_line = {off for off, _ in members[1:]} - line_starts
    assert line_starts and mid_line
    for target in (1, 50_000, 150_000):
        ranges = plan_ranges([path], target, dump["index_dir"])
        starts = {r.start for r in ranges[1:]}
        assert starts <= line_starts, target
        assert ranges[-1].end == len(blob)
    # target 1: every line-aligned member start
    assert {r.start for r in plan_ranges([path], 1, dump["index_dir"])[1:]} == line_starts


def test_gz_false_member_headers_are_not_split_points(tmp_path):
    """A stored (level 0) member whose data holds a whole valid gzip member:
    that inner header decompresses, but no member ends there."""
    lines = [json.dumps(item(f"Q{i}", sitelinks={"enwiki": f"T{i}"})).encode() + b",\n" for i in range(40)]
    lines[10] = EMBEDDED + b",\n"
    lines[30] = b"\x1f\x8b\x08 broken header,\n"
    data = b"".join(lines)
    groups = [lines[i : i + 5] for i in range(0, 40, 5)]
    blob = b"".join(gzip.compress(b"".join(g), compresslevel=0, mtime=0) for g in groups)
    path = tmp_path / "stored.json.gz"
    path.write_bytes(blob)
    true_starts = {off for off, _ in member_starts(blob)}
    assert blob.count(b"\x1f\x8b\x08") > len(true_starts)
    whole, _ = read_all(plan_ranges([str(path)], 1 << 40, str(tmp_path)))
    assert len(whole) == 38
    for target in range(1, len(blob), 97):
        ranges = plan_ranges([str(path)], target, str(tmp_path))
        assert {r.start for r in ranges} <= true_starts, target
        rows, stats = read_all(ranges)
        assert rows == whole
        assert stats.skipped == {"bad_json": 2}
    assert gzip.decompress(blob) == data


def test_gz_single_member_is_one_range(dump):
    path = dump["paths"]["single.json.gz"]
    ranges = plan_ranges([path], 10_000, dump["index_dir"])
    assert [(r.start, r.end) for r in ranges] == [(0, os.path.getsize(path))]


def test_gz_range_ending_mid_line_is_an_error(dump):
    path = dump["paths"]["dumplike.json.gz"]
    blob = Path(path).read_bytes()
    members = member_starts(blob)
    # the "," member after the first batch starts mid-line
    comma = next(off for off, data in members if data == b",\n")
    bad = WikidataRange(0, path, "gz", 0, comma)
    with pytest.raises(DumpError, match="line boundary") as e:
        read_range(bad, EntitySelection(), WikidataStats())
    assert path in str(e.value) and str(comma) in str(e.value)
    assert isinstance(e.value, ValueError)
    inside = WikidataRange(0, path, "gz", 0, comma - 3)  # ends inside a member
    with pytest.raises(DumpError, match="incomplete"):
        read_range(inside, EntitySelection(), WikidataStats())


def test_not_gzip_is_an_error(tmp_path):
    path = tmp_path / "fake.json.gz"
    path.write_bytes(b"[\n{}\n]\n")
    with pytest.raises(ValueError, match="not a gzip file"):
        plan_ranges([str(path)], 10, str(tmp_path))


# --------------------------------------------------------------------------
# bz2 index


def test_bz2_index_is_built_once_and_keyed_by_file(dump, tmp_path):
    path = tmp_path / "copy.json.bz2"
    path.write_bytes(Path(dump["paths"]["single.json.bz2"]).read_bytes())
    index_dir = tmp_path / "index"
    first = plan_ranges([str(path)], 1_000_000, str(index_dir))
    index_path = first[0].index_path
    assert {r.index_path for r in first} == {index_path}
    assert os.path.dirname(index_path) == str(index_dir)
    assert not [p for p in os.listdir(index_dir) if ".tmp" in p]
    stamp = os.stat(index_path).st_mtime_ns
    second = plan_ranges([str(path)], 1_000_000, str(index_dir))
    assert second == first and os.stat(index_path).st_mtime_ns == stamp  # reused
    assert first[-1].end == len(dump["data"])  # ranges split the uncompressed size
    path.write_bytes(bz2.compress(b"[\n]\n"))
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    third = plan_ranges([str(path)], 1_000_000, str(index_dir))
    assert third[0].index_path != index_path
    assert read_all(third)[0] == []


# --------------------------------------------------------------------------
# selection and rows


def test_deprecated_and_non_value_snaks_are_skipped():
    row = entity_row(DEPRECATED, EntitySelection())
    assert row == {
        "qid": "Q900001",
        "labels": [{"language": "en", "value": "Deprecated thing"}],
        "sitelinks": [{"wiki": "enwiki", "title": "Deprecated thing"}],
        "claims": [
            {"property": "P31", "value": "Q5"},
            {"property": "P31", "value": "Q6"},
            {"property": "P17", "value": "Q183"},
        ],
    }


def test_languages_wikis_and_properties_selection(dump):
    selection = EntitySelection(languages=("de", "en"), wikis=("dewiki", "enwiki"), properties=("P31", "P17"))
    row = entity_row(TWO_WIKIS, selection)
    assert row["labels"] == [{"language": "de", "value": "Zwei"}, {"language": "en", "value": "Two"}]
    assert row["sitelinks"] == [{"wiki": "dewiki", "title": "Zwei (Wiki)"}, {"wiki": "enwiki", "title": "Two (wiki)"}]
    assert row["claims"] == [{"property": "P31", "value": "Q515"}, {"property": "P17", "value": "Q183"}]
    assert entity_row(NO_SITELINK, EntitySelection()) is None
    assert entity_row(NO_SITELINK, EntitySelection(wikis=("frwiki",)))["sitelinks"] == [{"wiki": "frwiki", "title": "Seulement"}]
    assert entity_row(EMPTY_MAPS, EntitySelection()) == {
        "qid": "Q900004", "labels": [], "sitelinks": [{"wiki": "enwiki", "title": "Empty maps"}], "claims": []}
    assert entity_row(PROPERTY, EntitySelection()) is None

    dewiki_only = EntitySelection(languages=("de",), wikis=("dewiki",))
    rows, stats = read_all(one_range(dump["paths"]["plain.json"], dump["index_dir"]), dewiki_only)
    assert rows and all([s["wiki"] for s in r["sitelinks"]] == ["dewiki"] for r in rows)
    assert all(l["language"] == "de" for r in rows for l in r["labels"])
    assert "Q900003" in [r["qid"] for r in rows] and "Q900001" not in [r["qid"] for r in rows]
    assert stats.skipped["no_sitelink"] == 52 + 1 - stats.written
    assert_counts_add_up(stats)

    ease = EntitySelection(languages=("en", "fr", "ja"), wikis=MULTILINGUAL_EASE_WIKIS)
    rows, _ = read_all(one_range(dump["paths"]["plain.json"], dump["index_dir"]), ease)
    scotland = next(r for r in rows if r["qid"] == "Q22")
    assert [l["language"] for l in scotland["labels"]] == ["en", "fr", "ja"]
    assert [s["wiki"] for s in scotland["sitelinks"]] == [w for w in MULTILINGUAL_EASE_WIKIS if w in {s["wiki"] for s in scotland["sitelinks"]}]
    assert {"enwiki", "dewiki", "jawiki"} <= {s["wiki"] for s in scotland["sitelinks"]}
    assert all(s["wiki"] in MULTILINGUAL_EASE_WIKIS for r in rows for s in r["sitelinks"])


def test_value_kinds():
    claims = {
        "P1": [statement("P1", {"entity-type": "item", "numeric-id": 42}, kind="wikibase-entityid")],
        "P2": [statement("P2", {"entity-type": "property", "numeric-id": 7}, kind="wikibase-entityid")],
        "P3": [statement("P3", "abc-123", kind="string")],
        "P4": [statement("P4", {"text": "Bonjour", "language": "fr"}, kind="monolingualtext")],
        "P5": [statement("P5", {"amount": "+5.3", "unit": "1"}, kind="quantity")],
        "P6": [statement("P6", {"time": "+1952-03-11T00:00:00Z", "precision": 11}, kind="time")],
        "P7": [statement("P7", {"longitude": 2.5, "latitude": 1.0}, kind="globecoordinate")],
    }
    row = entity_row(item("Q1", sitelinks={"enwiki": "X"}, claims=claims), EntitySelection(properties=tuple(claims)))
    assert [c["value"] for c in row["claims"]] == [
        "Q42", "P7", "abc-123", "Bonjour", "+5.3", "+1952-03-11T00:00:00Z", '{"latitude": 1.0, "longitude": 2.5}']


def test_real_sample_values(dump):
    rows, _ = read_all(one_range(dump["paths"]["plain.json"], dump["index_dir"]),
                       EntitySelection(properties=DEFAULT_PROPERTIES + ("P1082", "P625", "P1448", "P571")))
    scotland = rows[0]
    assert scotland["qid"] == "Q22"
    assert scotland["labels"] == [{"language": "en", "value": "Scotland"}]
    assert scotland["sitelinks"] == [{"wiki": "enwiki", "title": "Scotland"}]
    values = {}
    for c in scotland["claims"]:
        values.setdefault(c["property"], []).append(c["value"])
    assert values["P17"] == ["Q145"]
    assert "Q3336843" in values["P31"]
    assert all(v.startswith(("+", "-")) for v in values.get("P1082", []))
    assert all(json.loads(v)["latitude"] for v in values.get("P625", []))


def test_default_selection_keeps_what_ease_and_aspectcse_need():
    """By default an item keeps its English label, its enwiki sitelink, and the claims the
    set builders read: P31 (EASE's hard-negative type), P279 (subclass), P17 and P452
    (AspectCSE's country and industry), P27 (citizenship); in that order, nothing else."""
    wanted = ["P31", "P17", "P452", "P27", "P279"]
    claims = {p: [statement(p, f"Q{100 + i}")] for i, p in enumerate(["P279", "P27", "P452", "P17", "P31", "P112", "P169"])}
    row = entity_row(item("Q1", labels={"de": "Eins", "en": "One", "fr": "Un"},
                          sitelinks={"dewiki": "Eins", "enwiki": "One", "frwiki": "Un"}, claims=claims), EntitySelection())
    assert row["labels"] == [{"language": "en", "value": "One"}]
    assert row["sitelinks"] == [{"wiki": "enwiki", "title": "One"}]
    assert [c["property"] for c in row["claims"]] == wanted
    assert entity_row(item("Q2", labels={"de": "Zwei"}, sitelinks={"dewiki": "Zwei"}), EntitySelection()) is None


def test_multilingual_ease_selection_keeps_the_papers_18_wikis():
    # EASE (Nishikawa et al. 2022) §5, footnote 4: "ar, ca, cs, de, en, eo, es, fa, fr, it, ja, ko, nl, pl, pt, ru, sv, tr"
    paper = "ar ca cs de en eo es fa fr it ja ko nl pl pt ru sv tr".split()
    others = ["zhwiki", "simplewiki", "enwikiquote", "commonswiki", "dewikivoyage"]
    sitelinks = {w: f"T-{w}" for w in [*others, *(f"{lang}wiki" for lang in reversed(paper))]}
    selection = EntitySelection(languages=paper, wikis=MULTILINGUAL_EASE_WIKIS)
    row = entity_row(item("Q3", sitelinks=sitelinks), selection)
    assert [s["wiki"] for s in row["sitelinks"]] == [f"{lang}wiki" for lang in paper]
    assert entity_row(item("Q4", sitelinks={w: "x" for w in others}), selection) is None


def test_selection_arguments_are_checked():
    assert EntitySelection(wikis=["dewiki"]).wikis == ("dewiki",)  # lists become tuples
    hash(EntitySelection(wikis=["dewiki"]))
    with pytest.raises(ValueError, match="wikis is empty"):
        EntitySelection(wikis=())
    with pytest.raises(TypeError, match="languages must be a sequence"):
        EntitySelection(languages="en")


# --------------------------------------------------------------------------
# stats


def test_stats_merge_and_as_dict():
    a, b = WikidataStats(), WikidataStats()
    a.lines, a.written = 10, 7
    a.skipped.update({"bad_json": 1, "non_item": 2})
    b.lines, b.written = 150, 0
    b.skipped.update({"bad_json": 150})
    for i in range(150):
        (a if i == 0 else b).quarantine({"path": "p", "offset": i, "reason": "bad_json: x", "snippet": "s"})
    merged = WikidataStats().merge(a).merge(b)
    assert merged.lines == 160 and merged.written == 7
    assert merged.skipped == {"bad_json": 151, "non_item": 2}
    d = merged.as_dict()
    json.dumps(d)
    assert d["quarantined_count"] == 150
    assert len(d["quarantined"]) == 100 and d["quarantined"][0]["offset"] == 0
    assert d["skipped"] == {"bad_json": 151, "non_item": 2}


def test_prefilter_skips_unlinked_items_without_parsing(tmp_path):
    lines = [
        '{"type":"item","id":"Q1","labels":{},"claims":{},"sitelinks":{"enwiki":{"site":"enwiki","title":"A"}}}',
        '{"type":"item","id":"Q2","labels":{},"claims":{},"sitelinks":{"frwiki":{"site":"frwiki","title":"B"}}}',
        '{"type":"item","id":"Q3","labels":{not json},"sitelinks":{}}',
    ]
    path = tmp_path / "p.json"
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    (rng,) = plan_ranges([str(path)], 1 << 20, str(tmp_path / "idx"))
    strict, fast = WikidataStats(), WikidataStats()
    assert [r["qid"] for r in read_range(rng, EntitySelection(), strict)] == ["Q1"]
    assert [r["qid"] for r in read_range(rng, EntitySelection(), fast, prefilter=True)] == ["Q1"]
    assert strict.skipped == {"no_sitelink": 1, "bad_json": 1}
    assert fast.skipped == {"no_sitelink": 2}  # the broken unlinked line is not parsed


def test_a_range_is_written_a_row_group_at_a_time(dump, tmp_path, monkeypatch):
    """A Wikidata task holds one row group of items, not its whole range: a ``.json.gz`` member is one range,
    however large. The rows are those of the range, in order, in row groups of ``WIKIDATA_ROWS``."""
    import pyarrow.parquet as pq

    from ingest import units

    path = dump["paths"]["single.json.gz"]
    (rng,) = one_range(path, dump["index_dir"])
    cfg = {"languages": ["en"], "wikis": ["enwiki"], "properties": ["P31"]}
    monkeypatch.setattr(units, "WIKIDATA_ROWS", 10)
    result = units.process_wikidata_range(rng, str(tmp_path), cfg)
    written = pq.ParquetFile(tmp_path / "wikidata" / result["file"])
    assert [written.metadata.row_group(i).num_rows for i in range(written.metadata.num_row_groups)] == [10] * 5 + [2]
    want = pa.Table.from_pylist(read_range(rng, EntitySelection(languages=("en",), wikis=("enwiki",),
                                                                properties=("P31",)), WikidataStats()),
                                schema=schemas.WIKIDATA)
    assert written.read().equals(want)
