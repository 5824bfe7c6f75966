"""``python -m eval report MODEL_OR_RUN …``: every model on every task that applies, one report.

Each argument is a training run folder (``train_summary.json``: its final
model, labelled by run name, linked to its folder and config), a model folder
(sentence-transformers, with or without structcse method heads) or a hub name.
The data flags say which tasks run; a task whose flag is absent is left out:

* ``--sts DIR`` → ``sts_all`` (the papers' seven sets and their mean, each
  model scored with its own similarity, ``--split``, default test; SICK-R is
  its SemEval test part, 4,927 pairs, as SentEval, unless ``--sick-protocol
  mteb``: all of SICK, as MTEB);
* ``--mrpc DIR`` → ``mrpc`` (SentEval's protocol and classifier, unless
  ``--mrpc-classifier sklearn``; ``test`` when the folder has the test
  file or is GLUE's MRPC from the hub, else cross-validation on train);

``--sts``, ``--mrpc`` and ``--nli`` take hub names or copies too (``infra.hub_data``), and alone (as the last
flag, or before another flag) their public datasets: MTEB's STS sets, ``nyu-mll/glue`` mrpc, ``stanfordnlp/snli``.
* ``--stc DIR`` → ``stc`` (EASE's short-text clustering);
* each method's own tasks, on its models only, in a table of their own:
  GaussCSE ``nli`` (AUPRC) and ``direction`` (``--nli DIR``), RSE
  ``link_prediction`` (``--nli DIR``), AspectCSE ``aspect_retrieval``
  (``--aspects DIR``), DSBATS ``srsd`` (``--srsd DIR``).

The untrained base (``--base MODEL``; by default the base model every run
folder's ``train_summary.json`` names, when they all name the same one) is a
row of every table, scored in the same run on the same data: on a method's own
tasks as the papers' baselines score a plain encoder (NLI and aspect retrieval
with cosine, SRSD with the offset representation, RSE's link prediction with no
relation vector: cos(h_1, h_j)); GaussCSE's table also has the paper's length
baseline for the direction. Each table has a ``Δ`` column (model − base) and a
``vs base`` column marking a model that is not above the base (``≤ base``); the
run ends with one line naming them.

Written to ``--out`` (default ``report``): ``report.md`` (the main table:
models as rows, STS sets, STS avg, MRPC, STC as columns, and the similarity
each model was scored with; the method tables; each table says its split,
protocol and similarity on the line under its heading; the papers' published
figures as reference rows marked *published*, test splits, never mixed with
measured ones, and only in the columns measured by the papers' protocol (a
SICK-R over all of SICK, an MRPC by cross-validation on train or by
scikit-learn's classifier: their published figures are left out, and the
report says so); the runs scored, with links), ``report.json`` (every task's full result
per model) and ``report_<column>.png`` (a bar chart per column; no STS avg
chart when the average is over one set: it would be that set's chart again).
``--limit N`` scores the first N items of every set (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from eval.published import PUBLISHED, STS_KEYS
from eval.tasks import DEFAULT_DATA

log = logging.getLogger(__name__)
MAIN_COLUMNS = [*((k, k) for k in STS_KEYS), ("sts_avg", "STS avg"), ("mrpc_accuracy", "MRPC acc"),
                ("mrpc_f1", "MRPC F1"), ("stc_accuracy", "STC acc")]


def method_tasks(method: str | None) -> tuple:
    """A method's own tasks, as its ``Method.eval_tasks`` declares them: ``(task, data flag, {result key:
    column header})``; none for a plain encoder."""
    from train.methods import get_method

    return get_method(method).eval_tasks if method and method != "-" else ()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval report", description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", help="run folders, model folders or hub names (LABEL=PATH names a row)")
    p.add_argument("--sts", nargs="?", const=DEFAULT_DATA["sts_all"],
                   help="sts_all's data: SentEval data/downstream tree or any STS/SICK folder of it, hub names or "
                        "copies (docs/data.md); --sts alone: MTEB's seven STS sets from the Hugging Face Hub")
    p.add_argument("--split", default="test", choices=("test", "dev", "train"), help="STS split (default test)")
    p.add_argument("--sick-protocol", default="senteval", choices=("senteval", "mteb"),
                   help="SICK-R's pairs: senteval (default) the SemEval-2014 test part, 4,927 pairs, the papers'; "
                        "mteb: all of SICK (9,927 pairs), MTEB's, whose published rows are then left out")
    p.add_argument("--mrpc", nargs="?", const=DEFAULT_DATA["mrpc"],
                   help="folder with msr_paraphrase_train.txt (and _test.txt), or a hub source; --mrpc alone: "
                        "nyu-mll/glue's mrpc (train -> test)")
    p.add_argument("--mrpc-classifier", default="senteval", choices=("senteval", "sklearn"),
                   help="MRPC's classifier: senteval (default) SentEval's (nn.Linear + Adam, early stopping, L2 by "
                        "10-fold CV), the papers'; sklearn: scikit-learn's logistic regression, whose published "
                        "rows are then left out")
    p.add_argument("--stc", help="folder of short-text clustering files")
    p.add_argument("--nli", nargs="?", const=DEFAULT_DATA["nli"],
                   help="SentEval NLI folder or a hub source (GaussCSE nli/direction, RSE link prediction); --nli "
                        "alone: stanfordnlp/snli")
    p.add_argument("--aspects", help="aspect_docs set folder (AspectCSE retrieval)")
    p.add_argument("--srsd", help="srsd set folder (DSBATS)")
    p.add_argument("--out", default="report", help="output path stem (default: report)")
    p.add_argument("--limit", type=int, help="first N items of every set (smoke runs)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None)
    p.add_argument("--no-published", action="store_true", help="leave out the papers' reference rows")
    p.add_argument("--base", help="the untrained base encoder (LABEL=PATH names its row): a row of every table, "
                   "with the difference of every model to it; default: the base model the run folders' "
                   "train_summary.json all name")
    p.add_argument("--no-base", action="store_true", help="no base row (and no difference to it)")
    from infra.logs import add_verbose_flag

    add_verbose_flag(p)
    return p


def resolve(argument: str) -> dict:
    """``{"label", "model", "run", "config"}`` of a run folder, model folder or hub name; ``LABEL=PATH`` names
    the row (the first ``=`` after which an existing path follows: labels and Tune's trial folders hold ``=``)."""
    for at in (i for i, c in enumerate(argument) if c == "="):
        if at and Path(argument[at + 1:]).expanduser().exists():
            return {**resolve(argument[at + 1:]), "label": argument[:at]}
    path = Path(argument).expanduser()
    summary = path / "train_summary.json"
    if summary.is_file():
        info = json.loads(summary.read_text())
        return {"label": info.get("run_name") or path.name, "model": info["model_path"], "run": str(path),
                "config": str(summary)}
    if path.exists() and not path.is_dir():
        raise FileNotFoundError(f"{argument}: not a run folder, model folder or hub name")
    label = (path.parent.name if path.name in ("model", "final") else path.name) if path.is_dir() else argument
    return {"label": label, "model": argument, "run": None, "config": None}


def _task_data(args) -> dict:
    return {"sts": args.sts, "mrpc": args.mrpc, "stc": args.stc, "nli": args.nli, "aspects": args.aspects,
            "srsd": args.srsd}


def check_inputs(args) -> list[dict]:
    """Every model argument resolved and every data folder checked, before a model loads."""
    from eval.tasks import get_task

    if not any(_task_data(args).values()):
        raise ValueError("give at least one data folder (--sts, --mrpc, --stc, --nli, --aspects, --srsd)")
    if args.sts:
        get_task("sts_all").check_data(args.sts, args.split, sick_protocol=_sick_protocol(args))
    if args.mrpc:
        get_task("mrpc").check_data(args.mrpc, _mrpc_split(args.mrpc))
    if args.stc:
        get_task("stc").check_data(args.stc, "test")
    if args.nli and not Path(args.nli).expanduser().exists():
        get_task("nli").check_data(args.nli, "dev")  # a hub source: readable now (infra.hub_data)
    for flag in ("aspects", "srsd"):  # checked by their tasks once a model of the method is loaded
        if getattr(args, flag) and not Path(getattr(args, flag)).expanduser().exists():
            raise FileNotFoundError(f"--{flag} {getattr(args, flag)}: no such folder")
    return [resolve(m) for m in args.models]


def base_entry(args, entries: list[dict]) -> dict | None:
    """The untrained base's entry (``"base": True``): ``--base``, else the base model all the run folders'
    summaries name; an entry of ``entries`` that is the same model is the base row itself (its label kept).
    None with ``--no-base`` or when there is no one base to take."""
    if getattr(args, "no_base", False):
        return None
    if getattr(args, "base", None):
        base = resolve(args.base)
    else:
        named = set()
        for entry in entries:
            if entry["config"]:
                named.add((json.loads(Path(entry["config"]).read_text()).get("config") or {}).get("model"))
        if len(named) != 1 or None in named or not all(e["config"] for e in entries if e["run"]):
            return None
        base = resolve(named.pop())
        base["label"] = f"{base['label']} (untrained base)"
    for entry in entries:
        if _same_model(entry["model"], base["model"]):
            entry["base"] = True
            return entry
    return {**base, "base": True}


def _same_model(a: str, b: str) -> bool:
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    if pa.exists() and pb.exists():
        return pa.resolve() == pb.resolve()
    return a == b


def _sick_protocol(args) -> str:
    return getattr(args, "sick_protocol", None) or "senteval"


def _mrpc_classifier(args) -> str:
    return getattr(args, "mrpc_classifier", None) or "senteval"


def _mrpc_split(folder: str) -> str:
    from eval.mrpc import SPLIT_FILES, hub_mrpc_source

    if hub_mrpc_source(folder) is not None:
        return "test"  # GLUE's MRPC has its labelled test split
    return "test" if (Path(folder) / SPLIT_FILES["test"]).is_file() else "train"


def score_model(entry: dict, args) -> tuple[dict, dict]:
    """(the row of the main table, ``{task: full result}``) for one model."""
    from eval.models import load_trained
    from eval.tasks import get_task

    model = load_trained(entry["model"], device=args.device)
    method = model.method_name
    row = {"model": entry["label"], "method": method or "-"}
    results: dict = {}
    limit = {"limit": args.limit} if args.limit else {}

    def run(task: str, data: str, split: str, **options) -> dict:
        started = time.perf_counter()
        t = get_task(task)
        target = model if t.model_kind == "trained" else model.encoder
        results[task] = t.run(target, data, split, batch_size=args.batch_size, **limit, **options)
        log.info(f"[report] {entry['label']}: {task} in {time.perf_counter() - started:.1f} s")
        return results[task]

    if args.sts:
        sts = run("sts_all", args.sts, args.split, sick_protocol=_sick_protocol(args))
        row.update({k: sts.get(k) for k in STS_KEYS}, sts_avg=sts["mean"], similarity=sts["similarity"])
    if args.mrpc:
        mrpc = run("mrpc", args.mrpc, _mrpc_split(args.mrpc), mrpc_classifier=_mrpc_classifier(args))
        row.update(mrpc_accuracy=mrpc["accuracy"], mrpc_f1=mrpc["f1"])
    if args.stc:
        row["stc_accuracy"] = run("stc", args.stc, "test")["accuracy"]
    data = _task_data(args)
    for task, flag, _ in method_tasks(method):
        if data[flag]:
            run(task, data[flag], "test")
    return row, results


class NoRelation:
    """The untrained base in RSE's link prediction: no relation vector (r = 0 for every relation of the RSE
    model), so the tail candidates are ranked by cos(h_1, h_j) of the plain encoder."""

    method_name = None

    def __init__(self, model, relation_names: list[str]):
        self.model, self.relation_names = model, list(relation_names)

    def encode(self, texts, batch_size: int = 64):
        return self.model.encode(texts, batch_size=batch_size)

    def relation_table(self):
        import numpy as np

        dim = int(np.asarray(self.model.encode(["a"])).shape[-1])
        return np.zeros((len(self.relation_names), dim), dtype=np.float32)


# what each method's table says the base was scored with, and its split and similarity
BASE_AS = {"nli": "cosine(premise, hypothesis)", "direction": "no directional score (cosine is symmetric)",
           "link_prediction": "no relation vector: cos(h_1, h_j)", "aspect_retrieval": "cosine",
           "srsd": "the offset representation"}
TASK_SIMILARITY = {
    "nli": "GaussCSE: sim(hyp‖prem) (asymmetric KL); the base: cosine. Split: test; the threshold tuned on dev",
    "direction": "GaussCSE: sim(hyp‖prem) vs sim(prem‖hyp) and Σ log σ²; the length baseline: word counts",
    "link_prediction": "RSE: cos(h_1 + r_k, h_j); the base: cos(h_1, h_j). Split: test",
    "aspect_retrieval": "cosine, held-out entities (the aspect_docs set: the test side)",
    "srsd": "cosine of pair representations (DSBATS: its pair head; the base: the offset), held-out split (test)",
}


def score_base_on_method_tasks(base: dict, methods: list[str], method_results: dict, args) -> dict:
    """``{task: result}`` of the untrained base on the own tasks of ``methods`` (those whose data is given):
    the paper's baseline way for a plain encoder (``BASE_AS``). ``method_results``: ``{task: a result of a
    model of the method}`` (RSE's relation names)."""
    from eval.models import load_trained
    from eval.tasks import get_task

    data = _task_data(args)
    wanted = [(task, flag) for method in methods for task, flag, _ in method_tasks(method) if data[flag]]
    wanted = [w for w in dict.fromkeys(wanted) if w[0] in method_results]
    if not wanted:
        return {}
    model = load_trained(base["model"], device=args.device)
    limit = {"limit": args.limit} if args.limit else {}
    results = {}
    for task, flag in wanted:
        started = time.perf_counter()
        t = get_task(task)
        if task == "link_prediction":
            target = NoRelation(model, method_results[task]["relations"])
        else:
            target = model if t.model_kind == "trained" else model.encoder
        results[task] = t.run(target, data[flag], "test", batch_size=args.batch_size, **limit)
        log.info(f"[report] {base['label']} (base): {task} in {time.perf_counter() - started:.1f} s")
    return results


def method_tables(main_rows: list[dict], all_results: list[dict], base_label: str | None = None,
                  base_results: dict | None = None) -> list[tuple[str, list[dict], list, list[str], list[dict]]]:
    """One ``(title, rows, columns, notes, below base)`` per method with scored method tasks (``main_rows``:
    each model's row). With a base (``base_label``, its results on the methods' tasks ``base_results``) the
    base is the first row, the paper's baseline (GaussCSE's length baseline) the next, and a Δ column of the
    table's first metric and a ``vs base`` column follow."""
    from eval.report import compare_with_base

    tables = []
    for method in dict.fromkeys(row["method"] for row in main_rows):
        tasks = method_tasks(method)
        rows = []
        for main_row, results in zip(main_rows, all_results):
            if main_row["method"] != method or main_row["model"] == base_label:
                continue
            row = {"model": main_row["model"]}
            for task, _, keys in tasks:
                for key, header in keys.items():
                    if task in results:
                        row[header] = results[task].get(key)
            if len(row) > 1:
                rows.append(row)
        if not rows:
            continue
        scored = [task for task, _, _ in tasks if any(task in r for m, r in zip(main_rows, all_results)
                                                      if m["method"] == method)]
        notes = [f"{task}: {TASK_SIMILARITY[task]}." for task in scored if task in TASK_SIMILARITY]
        extra = []
        if base_label is not None and base_results:
            base_row = {"model": f"{base_label} (untrained base)"}
            for task, _, keys in tasks:
                if task in base_results:
                    base_row.update({h: base_results[task].get(k) for k, h in keys.items()})
            if len(base_row) > 1:
                extra.append(base_row)
                notes.append("The untrained base: " + "; ".join(f"{t} with {BASE_AS[t]}" for t in scored
                                                                 if t in BASE_AS and t in base_results) + ".")
        if any(task == "direction" for task, _, _ in tasks):
            length = next((r["direction"]["length_baseline_acc"] for m, r in zip(main_rows, all_results)
                           if m["method"] == method and "direction" in r), None)
            if length is not None:
                extra.append({"model": "length baseline (GaussCSE paper: the longer sentence is the premise)",
                              **{h: length for k, h in dict(next(k for t, _, k in tasks if t == "direction")).items()}})
        columns = ["model"] + [h for task, _, keys in tasks for h in keys.values()
                               if any(h in r for r in rows + extra)]
        rows = extra + rows
        below = []
        if extra and extra[0]["model"].endswith("(untrained base)"):
            primary = columns[1]
            baseline_rows = [r["model"] for r in extra[1:]]
            rows, delta_columns, below = compare_with_base(
                rows, extra[0]["model"], [(primary, primary)], base_label=extra[0]["model"],
                own={m: [] for m in baseline_rows})
            for r in rows:
                if r["model"] in baseline_rows:
                    r["vs_base"] = "paper's baseline"
            columns = columns + delta_columns
        tables.append((f"{method}: its own tasks", rows, columns, notes, below))
    return tables


def bar_charts(rows: list[dict], columns: list[tuple[str, str]], stem: Path, base_label: str | None = None,
               skip: tuple[str, ...] = ()) -> list[Path]:
    """A bar chart per column (``skip``: keys left out); the base row's bar is grey and its value a dashed line."""
    from eval.plots import _figure, _save

    paths = []
    for key, header in columns:
        scored = [(r["model"], r[key]) for r in rows if isinstance(r.get(key), float)]
        if not scored or key in skip:
            continue
        fig = _figure(6, 0.4 * len(scored) + 1)
        ax = fig.add_subplot(111)
        ax.barh([m for m, _ in scored][::-1], [v for _, v in scored][::-1],
                color=["#999999" if m == base_label else "#4477aa" for m, _ in scored][::-1])
        base_value = next((v for m, v in scored if m == base_label), None)
        if base_value is not None:
            ax.axvline(base_value, color="black", linestyle="--", linewidth=1, label=f"untrained base {base_value:.4f}")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel(header)
        ax.set_title(header)
        safe = "".join(c if c.isalnum() else "_" for c in key)
        paths.append(_save(fig, stem.with_name(f"{stem.name}_{safe}.png")))
    return paths


def _primary(columns: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The main table's column a model is judged on against the base: STS avg, else MRPC acc, else STC acc."""
    keys = dict(columns)
    return next(((k, keys[k]) for k in ("sts_avg", "mrpc_accuracy", "stc_accuracy") if k in keys), None)


def protocol_line(args, scored_sets: list[str], all_results: list[dict], json_name: str) -> str:
    """The main table's line under its heading: each task's split and protocol as scored, and the similarity."""
    from eval.mrpc import CLASSIFIER_NAMES
    from eval.sts_all import sick_protocol_name

    parts, notes = [], []
    if args.sts:
        details = []
        years = [k for k in scored_sets if k.startswith("STS1")]
        if years:
            details.append(f"{', '.join(years)}: test, each year's subsets pooled into one Spearman (SentEval "
                           "'all', as SimCSE)")
        if "STSBenchmark" in scored_sets:
            details.append(f"STS-B {args.split}")
        if "SICK-R" in scored_sets:
            details.append(sick_protocol_name(_sick_protocol(args), args.split))
        parts.append(f"STS {args.split} split" + (f" ({'; '.join(details)})" if details else ""))
        sick = [(r.get("sts_all") or {}).get("sets", {}).get("SICK-R") or {} for r in all_results]
        notes += sorted({"read from " + ", ".join(f"`{f}`" for f in e["files"]) for e in sick if e.get("files")})
        notes += sorted({e["note"] for e in sick if e.get("note")})
    if args.mrpc:
        how = ("train → test, the papers' protocol" if _mrpc_split(args.mrpc) == "test" else
               "10-fold cross-validation on train (no test file; not the papers' train → test)")
        parts.append(f"MRPC {how}, {CLASSIFIER_NAMES[_mrpc_classifier(args)]}")
    if args.stc:
        parts.append("STC: the whole sets")
    similarity = ("; similarity: each model's own (column STS similarity; the field `similarity` of each row in "
                  f"{json_name}): cosine, GaussCSE's symmetric KL, RSE's relational score" if args.sts else
                  "; similarity: cosine features") if parts else ""
    return (f"Split: {', '.join(parts)}{similarity}."
            + "".join(f" SICK-R: {note}." for note in notes))


def published_columns(args, columns: list[tuple[str, str]], all_results: list[dict]) -> tuple[list, list[str]]:
    """(the main table's columns the papers' figures can be set beside, what is left out and why): SICK-R and
    STS avg only when SICK-R is its SemEval test part; MRPC only when it is train → test with SentEval's
    classifier."""
    drop, left_out = set(), []
    if args.sts and _sick_protocol(args) != "senteval" and any(key == "SICK-R" for key, _ in columns):
        drop |= {"SICK-R", "sts_avg"}
        left_out.append("SICK-R and STS avg (SICK-R measured over all of SICK, 9,927 pairs, as MTEB: "
                        "--sick-protocol mteb; the papers score its 4,927-pair test part)")
    if args.mrpc and (_mrpc_split(args.mrpc) != "test" or _mrpc_classifier(args) != "senteval"):
        why = (["by cross-validation on train (no test file)"] if _mrpc_split(args.mrpc) != "test" else []) + \
              (["with scikit-learn's logistic regression"] if _mrpc_classifier(args) != "senteval" else [])
        drop |= {"mrpc_accuracy", "mrpc_f1"}
        left_out.append(f"MRPC (measured {' and '.join(why)}; the papers train on train and score test with "
                        "SentEval's classifier)")
    return [c for c in columns if c[0] not in drop], left_out


def write(args, entries: list[dict], rows: list[dict], all_results: list[dict],
          base_results: dict | None = None) -> tuple[Path, Path, list[Path], list[dict]]:
    """``report.md``, ``report.json`` and the charts; returns them and the models not above the base
    (``eval.report.compare_with_base``'s list: on the main table's STS avg for a model without tasks of its
    own, on its method table's first metric for one with)."""
    from eval.report import compare_with_base, format_markdown
    from infra.secrets import redact

    stem = Path(args.out)
    if stem.suffix in (".md", ".json"):
        stem = stem.with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    md_path, json_path = stem.with_name(stem.name + ".md"), stem.with_name(stem.name + ".json")
    base = next((e for e in entries if e.get("base")), None)
    base_label = base["label"] if base else None
    columns = [c for c in MAIN_COLUMNS if any(r.get(c[0]) is not None for r in rows)]
    main_columns = [("model", "model"), ("method", "method"), *columns]
    if args.sts:
        main_columns.append(("similarity", "STS similarity"))
    scored_sets = [k for k in STS_KEYS if any(r.get(k) is not None for r in rows)]
    primary = _primary(columns)
    own_tasks = {r["model"] for r, res in zip(rows, all_results)
                 if any(task in res for task, _, _ in method_tasks(r["method"]))}
    shown = rows
    below: list[dict] = []
    if base is not None and primary is not None:
        shown, delta_columns, below = compare_with_base(rows, base_label, [primary], base_label=base_label)
        main_columns += delta_columns
        below = [b for b in below if b["model"] not in own_tasks]
    table_line = protocol_line(args, scored_sets, all_results, json_path.name)
    lines = ["# Evaluation report", "", table_line, "",
             f"{_notes(args, scored_sets, base, primary)}Spearman, MRPC and STC accuracy as fractions. "
             f"Models: {len(rows)}.", "",
             format_markdown(shown, main_columns), ""]
    published, published_lines = _published(args, columns, all_results)
    lines += published_lines
    for title, method_rows, method_columns, notes, method_below in method_tables(rows, all_results, base_label,
                                                                                 base_results):
        lines += [f"## {title}", "", " ".join(notes) or "Split: test.", "",
                  format_markdown(method_rows, method_columns), ""]
        below += method_below
    lines += ["## Runs scored", "", *_runs_scored(entries)]
    one_set = len(scored_sets) == 1
    charts = bar_charts(rows, columns, stem, base_label, skip=("sts_avg",) if one_set else ())
    if charts:
        lines += ["", "## Charts", ""]
        if one_set and args.sts:
            lines += [f"No STS avg chart: the average is over one set ({scored_sets[0]}), whose chart it would "
                      "repeat.", ""]
        lines += [f"![{p.stem}]({p.name})" for p in charts]
    md_path.write_text(redact("\n".join(lines) + "\n"), encoding="utf-8")
    payload = {"rows": shown, "published": published, "base": base_label, "below_base": below,
               "results": {e["label"]: r for e, r in zip(entries, all_results)},
               "base_method_tasks": base_results or {}, "runs": entries}
    json_path.write_text(json.dumps(redact(payload), indent=2, default=str) + "\n", encoding="utf-8")
    return md_path, json_path, charts, below


def _notes(args, scored_sets: list[str], base: dict | None, primary) -> str:
    """What the main table's STS avg is over, and what its Δ column is measured against."""
    sts_note = (f"STS avg is the mean over the {len(scored_sets)} of 7 sets scored"
                + (f" (not found: {', '.join(k for k in STS_KEYS if k not in scored_sets)}; the published "
                   "averages are over all 7)" if len(scored_sets) < 7 else "") + ". " if args.sts else "")
    base_note = (f"The untrained base: **{base['label']}** (`{base['model']}`), scored here on the same data; Δ "
                 f"{primary[1]} is each model minus it, `≤ base` marks a model not above it. "
                 if base is not None and primary else
                 "No untrained base in this report (give `--base MODEL`): no difference to it. " if base is None
                 else "")
    return sts_note + base_note


def _published(args, columns, all_results: list[dict]) -> tuple[list[dict], list[str]]:
    """The papers' rows that compare with the measured columns, and the report's section showing them."""
    from eval.report import format_markdown

    comparable, left_out = published_columns(args, columns, all_results)
    published = [] if args.no_published else [r for r in PUBLISHED
                                               if any(r.get(c[0]) is not None for c in comparable)]
    if not published:
        return published, []
    lines = ["## Published figures (reference rows: the papers' numbers, not measured here)", "",
             "Split: the papers' test splits (STS sets and MRPC test; EASE's STC: the whole sets); "
             "similarity: cosine (RSE: its relational score); protocol: SentEval's, as SimCSE ran it "
             "(STS12–16 'all', STS-B test, SICK-R's SemEval test part of 4,927 pairs, MRPC train → test "
             "with SentEval's classifier)"
             + (f". **The measured rows above are on the {args.split} split: not comparable with these.**"
                if args.sts and args.split != "test" else "."), ""]
    if left_out:
        lines += ["Left out of this table (measured above by another protocol, so the papers' figures do not "
                  "compare): " + "; ".join(left_out) + ".", ""]
    return published, lines + [format_markdown(published, [("model", "model"), *comparable]), ""]


def _runs_scored(entries: list[dict]) -> list[str]:
    """A line per model scored: where it came from (its run, config and TensorBoard logs)."""
    lines = []
    for entry in entries:
        links = [f"model `{entry['model']}`"] + (["the untrained base"] if entry.get("base") else [])
        if entry["run"]:
            links += [f"run [{entry['run']}]({entry['run']})", f"config [train_summary.json]({entry['config']})"]
            if (Path(entry["run"]) / "tensorboard").is_dir():  # train.tracking's event files
                links.append(f"TensorBoard `tensorboard --logdir {Path(entry['run']) / 'tensorboard'}`")
        lines.append(f"- **{entry['label']}**: " + ", ".join(links))
    return lines


def run_report(argv: list[str]) -> tuple[Path, Path, list[Path], list[dict]]:
    """Score and write (``argv`` as on the command line); a user error is a ``ValueError`` /
    ``FileNotFoundError`` naming the model or folder. Returns (markdown, JSON, charts, rows). The last line
    logged says which models are not above the untrained base."""
    from eval.report import below_base_line

    args = build_parser().parse_args(argv)
    entries = check_inputs(args)
    base = base_entry(args, entries)
    if base is not None and base not in entries:
        entries = [base, *entries]
    rows, all_results = [], []
    for entry in entries:
        try:
            row, results = score_model(entry, args)
        except (FileNotFoundError, ValueError) as error:
            raise type(error)(f"{entry['label']}: {error}") from None
        rows.append(row)
        all_results.append(results)
    base_results = {}
    if base is not None:
        methods = [r["method"] for r in rows if r["model"] != base["label"]]
        done = {task: result for results in all_results for task, result in results.items()}
        try:
            base_results = score_base_on_method_tasks(base, list(dict.fromkeys(methods)), done, args)
        except (FileNotFoundError, ValueError) as error:
            raise type(error)(f"{base['label']} (base): {error}") from None
    md_path, json_path, charts, below = write(args, entries, rows, all_results, base_results)
    if base is not None:
        log.info(f"[report] {below_base_line(below, base['label'])}")
    return md_path, json_path, charts, rows
