"""``structcse aspects``: AspectCSE end to end (Schopf et al., RANLP 2023, §4.2, §5.2, Table 5).

dumps (or an ingest output) -> aspect labels (the ``wikidata`` set, or a SPARQL
endpoint) -> ``aspect_triplets`` per variant + ``aspect_docs`` -> the models of
Table 5, trained on Ray Train:

- ``ceiling``: not a model: the best P/R/MRR@k any ranking reaches on these labels;
- ``generic``: the base encoder, untrained (the paper's generic row is SimCSE-sup);
- ``mnrl``: the MultipleNegativesRanking baseline (Ostendorff et al. 2022),
  one model per aspect on its single-aspect set's (anchor, positive) pairs
  (``configs/aspectcse_mnrl.yaml``; Ostendorff et al. trained on every pair);
- ``single``: AspectCSE, one model per aspect (``configs/aspectcse.yaml``);
- ``intersection`` and ``union``: AspectCSE on the multi-aspect sets;

-> aspect retrieval on the held-out entities (``eval/aspect_retrieval.py``):
``OUT/aspects.md`` (rows ceiling, generic, MNRL, single, ∩, ∪; P/R/MRR@10 per aspect;
``single`` and ``mnrl`` are each aspect's own model), ``OUT/aspects.json``, and
t-SNE PNGs of the generic model beside the union model per aspect.

    structcse aspects --wikipedia enwiki-…-multistream.xml.bz2 --wikidata latest-all.json.bz2 --out aspects_out
    structcse aspects --sets sets/enwiki --out aspects_out --model bert-base-uncased --set use_gpu=true
    structcse aspects --sets sets/enwiki --sparql https://query.wikidata.org/sparql \\
        --user-agent "me (me@example.org)" --out aspects_out
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from structcse.configs import training_config
from structcse.results import write_results

log = logging.getLogger(__name__)
ASPECT_NAMES = {"P17": "country", "P452": "industry", "P27": "citizenship", "P31": "instance of"}


def variants_of(aspects: list[str]) -> list[str]:
    singles = [f"single-{a}" for a in aspects]
    return singles + (["intersection", "union"] if len(aspects) > 1 else [])


def models_to_train(aspects: list[str]) -> list[tuple[str, str, str]]:
    """(run name, config, set variant) of every model of the table."""
    runs = [(f"mnrl-{a}", "aspectcse_mnrl", f"single-{a}") for a in aspects]
    runs += [(f"aspectcse-{v}", "aspectcse", v) for v in variants_of(aspects)]
    return runs


def build_sets(args, out: Path) -> Path:
    """Ingest (when dumps are given), then labels + aspect sets with ``python -m ingest.aspects``."""
    from ingest.aspects.__main__ import main as aspects_main

    sets = Path(args.sets) if args.sets else out / "sets"
    if args.wikipedia:
        from ingest.pipeline import IngestConfig, run_ingest

        from infra.owned import NotOurs
        from infra.storage import StorageError

        log.info(f"[aspects] ingest {len(args.wikipedia)} Wikipedia dump(s) + Wikidata -> {sets}")
        try:
            run_ingest(IngestConfig(wikipedia=list(args.wikipedia), wikidata=list(args.wikidata or []),
                                    out=str(sets), seed=args.seed))
        except (StorageError, NotOurs) as e:  # a user's folder, a second job into it: one line, exit 2
            print(f"structcse aspects: error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    argv = ["--intros", str(sets / "intros"), "--out", str(out / "aspects"), "--aspects", *args.aspects,
            "--seed", str(args.seed), "--random-negatives", str(args.random_negatives)]
    if args.triplets_per_anchor:
        argv += ["--triplets-per-anchor", str(args.triplets_per_anchor)]
    if args.sparql:
        argv += ["--sparql", args.sparql] + (["--user-agent", args.user_agent] if args.user_agent else [])
    else:
        argv += ["--wikidata-set", str(sets / "wikidata")]
    log.info(f"[aspects] aspect labels ({'SPARQL' if args.sparql else 'wikidata set'}) and sets -> {out / 'aspects'}")
    if aspects_main(argv) != 0:
        raise SystemExit(2)
    return out / "aspects"


def train_models(aspect_sets: Path, args, out: Path) -> dict[str, str]:
    from train.run import run as train_run

    models = {}
    for run_name, config, variant in models_to_train(args.aspects):
        log.info(f"[aspects] train {run_name} ({config}) on {aspect_sets / variant}")
        cfg = training_config(config, [f"model={args.model}", f"data={aspect_sets / variant}", f"seed={args.seed}",
                                       f"storage_path={out / 'runs'}", f"run_name={run_name}", *args.overrides])
        models[run_name] = train_run(cfg).model_path
    return models


def score(models: dict[str, str], base: str, docs: Path, aspects: list[str]) -> dict[str, dict]:
    """{table row: {aspect: retrieval metrics of the row's model on that aspect}}."""
    from eval.aspect_retrieval import evaluate_aspect_retrieval
    from eval.models import load_encoder

    rows = {"ceiling": {}, "generic": {}, "mnrl": {}, "single": {}, "intersection": {}, "union": {}}
    per_model = {"generic": base, **models}
    results = {}
    for name, path in per_model.items():
        results[name] = evaluate_aspect_retrieval(load_encoder(path), docs)["per_aspect"]
        log.info(f"[aspects] {name}: " + ", ".join(f"{a} P@10 {results[name][a]['P@10']:.3f}"
                                                  for a in aspects if a in results[name]))
    rows["ceiling"] = ceilings(docs, aspects)
    for a in aspects:
        rows["generic"][a] = results["generic"].get(a)
        rows["mnrl"][a] = results[f"mnrl-{a}"].get(a)
        rows["single"][a] = results[f"aspectcse-single-{a}"].get(a)
        if len(aspects) > 1:
            rows["intersection"][a] = results["aspectcse-intersection"].get(a)
            rows["union"][a] = results["aspectcse-union"].get(a)
    return {row: cells for row, cells in rows.items() if cells}


def ceilings(docs: Path, aspects: list[str]) -> dict[str, dict]:
    """{aspect: the best P/R/MRR@k any ranking reaches on the held-out documents' labels}."""
    from score.aspects import read_aspect_docs, retrieval_ceiling

    by_aspect = read_aspect_docs(docs)
    return {a: retrieval_ceiling(by_aspect[a].labels) for a in aspects if a in by_aspect}


ROW_NAMES = {"ceiling": "ceiling (every relevant document ranked first)",
             "generic": "generic: the untrained base encoder (the paper's: SimCSE-sup)",
             "mnrl": "MNRL (Ostendorff et al.), per aspect, on AspectCSE's pairs (theirs: every pair)",
             "single": "AspectCSE single-aspect, per aspect", "intersection": "AspectCSE multi-aspect (∩)",
             "union": "AspectCSE multi-aspect (∪)"}


def table_markdown(rows: dict[str, dict], aspects: list[str], k: int = 10) -> str:
    """Table 5's shape: a row per model kind, P / R / MRR @k per aspect."""
    names = [ASPECT_NAMES.get(a, a) for a in aspects]
    head = ("| model | " + " | ".join(f"{n} P@{k} | {n} R@{k} | {n} MRR@{k}" for n in names) + " | "
            + " | ".join(f"Δ {n} P@{k} vs generic" for n in names) + " | vs generic |")
    lines = [head, "|---|" + "---:|" * (4 * len(aspects)) + "---|"]
    generic = rows.get("generic", {})
    for row, cells in rows.items():
        values, deltas, worse = [], [], []
        for a, n in zip(aspects, names):
            m, g = cells.get(a), generic.get(a)
            values += [f"{m[f'{x}@{k}']:.3f}" if m else "–" for x in ("P", "R", "MRR")]
            delta = m[f"P@{k}"] - g[f"P@{k}"] if m and g and row not in ("generic", "ceiling") else None
            deltas.append(f"{delta:+.3f}" if delta is not None else "–")
            if delta is not None and delta <= 0:
                worse.append(f"{n} P@{k}")
        versus = ("base" if row == "generic" else "not a model" if row == "ceiling"
                  else f"≤ generic: {', '.join(worse)}" if worse
                  else "above generic" if any(d != "–" for d in deltas) else "–")
        lines.append(f"| {ROW_NAMES[row]} | " + " | ".join(values + deltas) + f" | {versus} |")
    return "\n".join(lines)


TABLE_NOTE = ("Split: the held-out entities (the aspect_docs set: the test side); similarity: cosine. Δ: P@k minus "
              "the generic row's (the untrained base encoder); `≤ generic`: a model not above it on that aspect.")


def plots(models: dict[str, str], base: str, docs: Path, aspects: list[str], out: Path) -> list[str]:
    from eval.aspect_retrieval import compare_models_tsne
    from eval.models import load_encoder

    best = "aspectcse-union" if "aspectcse-union" in models else f"aspectcse-single-{aspects[0]}"
    pair = {"generic": load_encoder(base), best: load_encoder(models[best])}
    written = []
    for a in aspects:
        path = out / f"aspects_tsne_{a}.png"
        try:
            written.append(str(compare_models_tsne(pair, docs, a, path)))
        except ValueError as e:  # too few documents for a t-SNE
            log.warning(f"[aspects] no t-SNE for {a}: {e}")
    return written


def run_aspects(args) -> dict:
    started = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    aspect_sets = build_sets(args, out)
    models = train_models(aspect_sets, args, out)
    rows = score(models, args.model, aspect_sets / "aspect_docs", args.aspects)
    table = table_markdown(rows, args.aspects)
    pngs = plots(models, args.model, aspect_sets / "aspect_docs", args.aspects, out)
    title = "AspectCSE: aspect retrieval on the held-out entities (k = 10)"
    markdown = f"# {title}\n\n{TABLE_NOTE}\n\n{table}\n\n" + "".join(f"![t-SNE]({Path(p).name})\n" for p in pngs)
    return write_results(out, "aspects", markdown, {
        "rows": rows, "models": models, "base": args.model, "aspects": args.aspects, "plots": pngs,
        "seconds": round(time.time() - started, 1)}, table)


def add_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--wikipedia", nargs="+", help="Wikipedia dump(s): ingest them first (with --wikidata)")
    source.add_argument("--sets", help="an ingest output folder holding intros/ and wikidata/")
    p.add_argument("--wikidata", nargs="+", help="Wikidata JSON dump(s), with --wikipedia")
    p.add_argument("--sparql", metavar="URL", help="take the aspect labels from this SPARQL endpoint instead")
    p.add_argument("--user-agent", help="User-Agent for --sparql (the Wikidata Query Service asks for a contact)")
    p.add_argument("--out", default="aspects_out")
    p.add_argument("--model", default="bert-base-uncased", help="base encoder (the paper: BERT-base)")
    p.add_argument("--aspects", nargs="+", default=["P17", "P452"], help="aspect properties (default: country, industry)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--random-negatives", type=int, default=10000)
    p.add_argument("--triplets-per-anchor", type=int, default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="training override for every model (e.g. use_gpu=true, max_steps=200)")
