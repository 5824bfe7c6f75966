"""``python -m eval report MODEL_OR_RUN …``: every model on every task that applies, one report.

Each argument is a training run folder (``train_summary.json``: its final
model, labelled by run name, linked to its folder and config), a model folder
(sentence-transformers, with or without structcse method heads) or a hub name.
The data flags say which tasks run; a task whose flag is absent is left out:

* ``--sts DIR`` → ``sts_all`` (the papers' seven sets and their mean, each
  model scored with its own similarity, ``--split``, default test);
* ``--mrpc DIR`` → ``mrpc`` (SentEval; ``test`` when the folder has the test
  file, else cross-validation on train);
* ``--stc DIR`` → ``stc`` (EASE's short-text clustering);
* each method's own tasks, on its models only, in a table of their own:
  GaussCSE ``nli`` (AUPRC) and ``direction`` (``--nli DIR``), RSE
  ``link_prediction`` (``--nli DIR``), AspectCSE ``aspect_retrieval``
  (``--aspects DIR``), DSBATS ``srsd`` (``--srsd DIR``).

Written to ``--out`` (default ``report``): ``report.md`` (the main table:
models as rows, STS sets, STS avg, MRPC, STC as columns; the method tables;
the papers' published figures as reference rows marked *published*, never
mixed with measured ones; the runs scored, with links), ``report.json`` (every
task's full result per model) and ``report_<column>.png`` (a bar chart per
column). ``--limit N`` scores the first N items of every set (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from eval.published import PUBLISHED, STS_KEYS

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
    p.add_argument("--sts", help="SentEval data/downstream tree or any STS/SICK folder of it")
    p.add_argument("--split", default="test", choices=("test", "dev", "train"), help="STS split (default test)")
    p.add_argument("--mrpc", help="folder with msr_paraphrase_train.txt (and _test.txt)")
    p.add_argument("--stc", help="folder of short-text clustering files")
    p.add_argument("--nli", help="SentEval NLI folder (GaussCSE nli/direction, RSE link prediction)")
    p.add_argument("--aspects", help="aspect_docs set folder (AspectCSE retrieval)")
    p.add_argument("--srsd", help="srsd set folder (DSBATS)")
    p.add_argument("--out", default="report", help="output path stem (default: report)")
    p.add_argument("--limit", type=int, help="first N items of every set (smoke runs)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None)
    p.add_argument("--no-published", action="store_true", help="leave out the papers' reference rows")
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
        get_task("sts_all").check_data(args.sts, args.split)
    if args.mrpc:
        get_task("mrpc").check_data(args.mrpc, _mrpc_split(args.mrpc))
    if args.stc:
        get_task("stc").check_data(args.stc, "test")
    for flag in ("nli", "aspects", "srsd"):  # checked by their tasks once a model of the method is loaded
        if getattr(args, flag) and not Path(getattr(args, flag)).expanduser().exists():
            raise FileNotFoundError(f"--{flag} {getattr(args, flag)}: no such folder")
    return [resolve(m) for m in args.models]


def _mrpc_split(folder: str) -> str:
    from eval.mrpc import SPLIT_FILES

    return "test" if (Path(folder) / SPLIT_FILES["test"]).is_file() else "train"


def score_model(entry: dict, args, log=print) -> tuple[dict, dict]:
    """(the row of the main table, ``{task: full result}``) for one model."""
    from eval.models import load_trained
    from eval.tasks import get_task

    model = load_trained(entry["model"], device=args.device)
    method = model.method_name
    row = {"model": entry["label"], "method": method or "-"}
    results: dict = {}
    limit = {"limit": args.limit} if args.limit else {}

    def run(task: str, data: str, split: str) -> dict:
        started = time.perf_counter()
        t = get_task(task)
        target = model if t.model_kind == "trained" else model.encoder
        results[task] = t.run(target, data, split, batch_size=args.batch_size, **limit)
        log(f"[report] {entry['label']}: {task} in {time.perf_counter() - started:.1f} s")
        return results[task]

    if args.sts:
        sts = run("sts_all", args.sts, args.split)
        row.update({k: sts.get(k) for k in STS_KEYS}, sts_avg=sts["mean"], similarity=sts["similarity"])
    if args.mrpc:
        mrpc = run("mrpc", args.mrpc, _mrpc_split(args.mrpc))
        row.update(mrpc_accuracy=mrpc["accuracy"], mrpc_f1=mrpc["f1"])
    if args.stc:
        row["stc_accuracy"] = run("stc", args.stc, "test")["accuracy"]
    data = _task_data(args)
    for task, flag, _ in method_tasks(method):
        if data[flag]:
            run(task, data[flag], "test")
    return row, results


def method_tables(main_rows: list[dict], all_results: list[dict]) -> list[tuple[str, list[dict], list]]:
    """One ``(title, rows, columns)`` per method with scored method tasks (``main_rows``: each model's row)."""
    tables = []
    for method in dict.fromkeys(row["method"] for row in main_rows):
        tasks = method_tasks(method)
        rows = []
        for main_row, results in zip(main_rows, all_results):
            if main_row["method"] != method:
                continue
            row = {"model": main_row["model"]}
            for task, _, keys in tasks:
                for key, header in keys.items():
                    if task in results:
                        row[header] = results[task].get(key)
            if len(row) > 1:
                rows.append(row)
        if rows:
            columns = ["model"] + [h for task, _, keys in tasks for h in keys.values() if any(h in r for r in rows)]
            tables.append((f"{method}: its own tasks", rows, columns))
    return tables


def bar_charts(rows: list[dict], columns: list[tuple[str, str]], stem: Path) -> list[Path]:
    from eval.plots import _figure, _save

    paths = []
    for key, header in columns:
        scored = [(r["model"], r[key]) for r in rows if isinstance(r.get(key), float)]
        if not scored:
            continue
        fig = _figure(6, 0.4 * len(scored) + 1)
        ax = fig.add_subplot(111)
        ax.barh([m for m, _ in scored][::-1], [v for _, v in scored][::-1], color="#4477aa")
        ax.set_xlabel(header)
        ax.set_title(header)
        safe = "".join(c if c.isalnum() else "_" for c in key)
        paths.append(_save(fig, stem.with_name(f"{stem.name}_{safe}.png")))
    return paths


def write(args, entries: list[dict], rows: list[dict], all_results: list[dict]) -> tuple[Path, Path, list[Path]]:
    from eval.report import format_markdown
    from infra.secrets import redact

    stem = Path(args.out)
    if stem.suffix in (".md", ".json"):
        stem = stem.with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    columns = [c for c in MAIN_COLUMNS if any(r.get(c[0]) is not None for r in rows)]
    main_columns = [("model", "model"), ("method", "method"), *columns]
    scored_sets = [k for k in STS_KEYS if any(r.get(k) is not None for r in rows)]
    sts_note = (f"STS: SentEval 'all' protocol, split {args.split}, each model with its own similarity "
                f"(`similarity` in report.json); STS avg is the mean over the {len(scored_sets)} of 7 sets scored"
                + (f" (not found: {', '.join(k for k in STS_KEYS if k not in scored_sets)}; the published "
                   "averages are over all 7)" if args.sts and len(scored_sets) < 7 else "") + ". " if args.sts else "")
    lines = ["# Evaluation report", "",
             f"{sts_note}Spearman, MRPC and STC accuracy as fractions. Models: {len(rows)}.", "",
             format_markdown(rows, main_columns), ""]
    published = [] if args.no_published else [r for r in PUBLISHED if any(r.get(c[0]) is not None for c in columns)]
    if published:
        lines += ["## Published figures (reference rows: the papers' numbers, not measured here)", "",
                  format_markdown(published, [("model", "model"), *columns]), ""]
    for title, method_rows, method_columns in method_tables(rows, all_results):
        lines += [f"## {title}", "", format_markdown(method_rows, method_columns), ""]
    lines += ["## Runs scored", ""]
    for entry in entries:
        links = [f"model `{entry['model']}`"]
        if entry["run"]:
            links += [f"run [{entry['run']}]({entry['run']})", f"config [train_summary.json]({entry['config']})"]
            if (Path(entry["run"]) / "tensorboard").is_dir():  # train.tracking's event files
                links.append(f"TensorBoard `tensorboard --logdir {Path(entry['run']) / 'tensorboard'}`")
        lines.append(f"- **{entry['label']}**: " + ", ".join(links))
    charts = bar_charts(rows, columns, stem)
    if charts:
        lines += ["", "## Charts", ""] + [f"![{p.stem}]({p.name})" for p in charts]
    md_path, json_path = stem.with_name(stem.name + ".md"), stem.with_name(stem.name + ".json")
    md_path.write_text(redact("\n".join(lines) + "\n"), encoding="utf-8")
    payload = {"rows": rows, "published": published,
               "results": {e["label"]: r for e, r in zip(entries, all_results)}, "runs": entries}
    json_path.write_text(json.dumps(redact(payload), indent=2, default=str) + "\n", encoding="utf-8")
    return md_path, json_path, charts


def run_report(argv: list[str], log=print) -> tuple[Path, Path, list[Path], list[dict]]:
    """Score and write (``argv`` as on the command line); a user error is a ``ValueError`` /
    ``FileNotFoundError`` naming the model or folder. Returns (markdown, JSON, charts, rows)."""
    args = build_parser().parse_args(argv)
    entries = check_inputs(args)
    rows, all_results = [], []
    for entry in entries:
        try:
            row, results = score_model(entry, args, log=log)
        except (FileNotFoundError, ValueError) as error:
            raise type(error)(f"{entry['label']}: {error}") from None
        rows.append(row)
        all_results.append(results)
    md_path, json_path, charts = write(args, entries, rows, all_results)
    return md_path, json_path, charts, rows

