"""``build_dsbats``: BATS folder + semantic network -> ``bats_definitions/``, ``dsbats4cl/``, ``srsd/``.

Each set is a folder of parquet files with a ``_manifest.json``; the
``bats_definitions`` manifest accounts for every BATS pair (word, answer) of
the chosen categories as written or dropped with its reason, per category,
and for every BATS line that did not parse (file and line number).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import pyarrow as pa

from setformat import schemas
from ingest.dsbats.bats import DEFAULT_CATEGORIES, check_categories, read_bats
from ingest.dsbats.contrastive import dsbats4cl_rows, split_rows, srsd_rows
from ingest.dsbats.definitions import run_definitions
from ingest.dsbats.senses import SenseConfig
from setformat.io import file_digest, write_manifest, write_table

log = logging.getLogger(__name__)
FILE_ROWS = 200_000


@dataclass
class DsbatsConfig:
    categories: list[str] = field(default_factory=lambda: list(DEFAULT_CATEGORIES))
    senses: SenseConfig = field(default_factory=SenseConfig)
    seed: int = 42
    test_share: float = 0.2  # of BATS lines
    holdout: str = "lines"  # lines (the slides' DSBATS-dic: words may recur) | words (contrastive.py)
    positives_per_pair: int = 58  # 2,244,530 DSBATS4CL rows / 38,676 DSBATS-sn pairs in the slides
    distractors: int = 1  # other-cluster candidates per SRSD item: chance 50%
    workers: int = 1  # Ray Data actors, each with its own copy of the network

    def validate(self) -> "DsbatsConfig":
        from dataclasses import asdict

        from infra.secrets import check_no_secrets

        check_no_secrets(asdict(self), "dsbats config")
        self.categories = check_categories(self.categories)
        self.senses.validate()
        if not 0 < self.test_share < 1:
            raise ValueError(f"test_share: {self.test_share!r} — expected a fraction in (0, 1)")
        if self.holdout not in ("words", "lines"):
            raise ValueError(f"holdout: {self.holdout!r} — expected words or lines")
        for name in ("positives_per_pair", "distractors", "workers"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: {getattr(self, name)!r} — expected an integer >= 1")
        return self


def _write_chunks(table: pa.Table, path: str) -> list[str]:
    names = []
    for i, start in enumerate(range(0, max(table.num_rows, 1), FILE_ROWS)):
        names.append(f"part-{i:05d}.parquet")
        write_table(table.slice(start, FILE_ROWS), f"{path}/{names[-1]}")
    return names


def _per_category(outcomes: list[dict]) -> dict:
    """``{category: {outcome: n}}`` for the manifest."""
    per: dict[str, Counter] = {}
    for r in outcomes:
        per.setdefault(r["category"], Counter())[r["outcome"]] += 1
    return {c: dict(sorted(v.items())) for c, v in sorted(per.items())}


def _pair_accounting(bats, outcomes: list[dict]) -> dict:
    in_input = sum(len(ln.answers) for ln in bats.lines) + bats.duplicate_answers
    written = {(r["category"], r["line"], r["second_word"]) for r in outcomes if r["outcome"] == "written"}
    dropped = Counter(r["outcome"] for r in outcomes if r["outcome"] != "written")
    if bats.duplicate_answers:
        dropped["duplicate_answer"] = bats.duplicate_answers
    return {"in_input": in_input, "written": len(written), "dropped": dict(sorted(dropped.items())),
            "accounted": len(written) + sum(dropped.values()) == in_input,
            "lines_skipped": len(bats.skipped), "skipped_lines": bats.skipped[:100]}


def build_dsbats(bats_folder: str, network: dict, out: str, cfg: DsbatsConfig) -> dict:
    from setformat.integrity import finish_job, start_job

    cfg.validate()
    out = out.rstrip("/")
    # its sets are whole once it is done; what an earlier run left in them is removed now
    job_id = start_job(out, "dsbats", "python -m ingest.dsbats", sets=("bats_definitions", "dsbats4cl", "srsd"))
    started = time.perf_counter()
    bats = read_bats(bats_folder, cfg.categories)
    outcomes = run_definitions(bats, network, cfg.senses, cfg.workers).to_pylist()
    generation_s = time.perf_counter() - started
    rows = []
    for r in outcomes:
        if r["outcome"] != "written":
            continue
        pair_id = f"{r['category']}:{r['line']:03d}:{r['second_word']}"
        if cfg.senses.senses == "all":
            pair_id += f":{r['first_synset']}:{r['second_synset']}"
        rows.append({**r, "cluster": r["category"], "pair_id": pair_id})
    split = split_rows(rows, cfg.seed, cfg.test_share, cfg.holdout)
    rows.sort(key=lambda r: r["pair_id"])

    common = {"config": {**asdict(cfg), "network": {k: v for k, v in network.items() if "key" not in k}},
              "inputs": {"bats": {c: file_digest(str(p)) for c, p in bats.files.items()}}}
    definitions = pa.Table.from_pylist(rows, schema=schemas.BATS_DEFINITIONS)
    files = _write_chunks(definitions, f"{out}/bats_definitions")
    per_category = _per_category(outcomes)
    rules = Counter(r["sense_rule"] for r in rows)
    manifests = {"bats_definitions": write_manifest(
        f"{out}/bats_definitions", "bats_definitions", definitions.num_rows, **common, files=files,
        pairs=_pair_accounting(bats, outcomes), per_category=per_category, sense_rules=dict(sorted(rules.items())),
        names_kept=sum(1 for r in rows if r["names_kept"]), split=split,
        generation_seconds=round(generation_s, 3))}

    train, train_info = dsbats4cl_rows(rows, cfg.seed, cfg.positives_per_pair)
    manifests["dsbats4cl"] = write_manifest(
        f"{out}/dsbats4cl", "dsbats4cl", train.num_rows, **common, files=_write_chunks(train, f"{out}/dsbats4cl"),
        anchors=split.get("train", 0), **train_info)
    test, test_info = srsd_rows(rows, cfg.seed, cfg.distractors)
    manifests["srsd"] = write_manifest(
        f"{out}/srsd", "srsd", test.num_rows, **common, files=_write_chunks(test, f"{out}/srsd"),
        queries=split.get("test", 0), **test_info)
    finish_job(out, job_id)
    sizes = {c: sum(n for o, n in v.items() if o == "written") for c, v in per_category.items()}
    log.info(f"[dsbats] {len(bats.lines)} BATS lines in {len(bats.files)} categories -> {definitions.num_rows} "
             f"definition pairs ({split}) in {generation_s:.1f} s; {train.num_rows} DSBATS4CL rows, "
             f"{test.num_rows} SRSD items")
    return {"sizes": sizes, "generation_seconds": generation_s, "pairs_in_input": manifests["bats_definitions"]["pairs"],
            "rows": {k: m["rows"] for k, m in manifests.items()}, "manifests": manifests}
