"""What a search leaves for its user, in ``{storage}/{name}/``:

* ``search_report.md`` — one row per trial: its searched values, its best dev score and the examples
  seen when it was scored, examples seen in all, and how it ended (ran to ``max_t``, stopped by ASHA
  at a rung, error); the base config's own trial is marked, and the report says whether the best
  trial beat it;
* ``learning_curves.png`` — each trial's dev score against examples seen;
  ``search_space.png`` — best score against the first searched key (log scale for lr), coloured by
  the second (e.g. batch size);
* ``best_config.yaml`` — the base training config with the best trial's values (and the trial's
  ``max_steps`` / ``checkpoint_every_steps`` for its batch size): ``python -m train --config`` runs it
  as is;
* ``best_model/`` — the best trial's best checkpoint, as a sentence-transformers folder (with the
  method's heads).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.uris import is_uri, upload_folder
from train.config import TrainConfig
from tune.trials import base_values, resolved_trial_config


@dataclass
class SearchOutcome:
    best_config: dict  # the searched keys' values of the best trial
    best_metrics: dict  # the best trial's best-scored report (metric, step, examples_seen, ...)
    metric: str
    results: Any  # Tune's ResultGrid
    folder: str  # {storage}/{name}
    files: dict = field(default_factory=dict)  # what tune.report wrote: report, plots, best config, best model
    trials: list = field(default_factory=list)  # tune.report.trial_rows


def trial_rows(results, settings, metric: str, max_t: int | None) -> list[dict]:
    """One dict per trial: id, values, best score (and where), examples seen, how it ended, its curve."""
    rows = []
    for result in results:
        config = result.config or {}
        frame = result.metrics_dataframe
        values = {k: config.get(k) for k in settings.search_space}
        row = {"trial_id": (result.metrics or {}).get("trial_id") or Path(str(result.path)).name, "values": values,
               "config": config,
               "best": None, "best_step": None, "best_examples": None, "examples_seen": 0, "curve": [],
               "error": str(result.error).splitlines()[0][:200] if result.error else None}
        if frame is not None and len(frame):
            seen = [frame[c].max() for c in ("examples_seen", "examples_trained") if c in frame]
            seen = [x for x in seen if x == x]  # not NaN
            if seen:
                row["examples_seen"] = int(max(seen))
            if metric in frame:
                scored = frame[frame[metric].notna()].sort_values("examples_seen")
                row["curve"] = [(int(e), float(v)) for e, v in zip(scored["examples_seen"], scored[metric])]
                if len(scored):
                    best = scored.loc[scored[metric].idxmax() if settings.mode == "max" else scored[metric].idxmin()]
                    row.update(best=float(best[metric]), best_examples=int(best["examples_seen"]),
                               best_step=int(best.get("validated_step", best.get("step"))))
        row["ended"] = ("error" if row["error"] else "ran to the end" if max_t and row["examples_seen"] >= max_t
                        else f"stopped at {row['examples_seen']} examples")
        rows.append(row)
    return rows


def _better(a, b, mode) -> bool:
    return b is None or (a is not None and (a > b if mode == "max" else a < b))


def write_search_report(results, base: TrainConfig, settings, metric: str, folder: str, private: dict, log=print,
                        max_t: int | None = None):
    """The search's report, plots, ``best_config.yaml`` and ``best_model/`` in ``folder`` (a local folder or a
    URI: then written in a local staging folder and uploaded)."""
    if not is_uri(folder):
        return _write_search_report(results, base, settings, metric, folder, private, log, max_t)
    with tempfile.TemporaryDirectory(prefix="structcse-search-") as staging:
        outcome = _write_search_report(results, base, settings, metric, staging, private, log, max_t, remote=folder)
        upload_folder(staging, folder, replace=False)  # the folder holds the trials too
    outcome.folder = folder
    outcome.files = {k: v.replace(staging, folder.rstrip("/"), 1) for k, v in outcome.files.items()}
    return outcome


def _write_search_report(results, base: TrainConfig, settings, metric: str, folder: str, private: dict, log,
                         max_t: int | None, remote: str | None = None):
    folder_path = Path(folder)
    rows = trial_rows(results, settings, metric, max_t)
    best = None
    for row in rows:
        if _better(row["best"], best["best"] if best else None, settings.mode):
            best = row
    base_vals = base_values(base, settings)
    base_row = next((r for r in rows if r["values"] == base_vals), None) if settings.include_base_config else None
    files = {}
    lines = [f"# Search `{settings.name}`: {base.method}, {metric} ({settings.mode})", "",
             (f"{len(rows)} trials, searcher {settings.searcher}, scheduler {settings.scheduler} (time attribute: "
             f"examples seen{f', max_t {max_t}' if max_t else ''}); examples seen by all trials: "
             f"{sum(r['examples_seen'] for r in rows)}."), ""]
    if best is None:
        lines += ["**No trial was scored.**", ""]
    else:
        lines += [(f"Best: trial `{best['trial_id']}` with {_fmt_values(best['values'])}: {metric} "
                  f"**{best['best']:.4f}** at {best['best_examples']} examples (step {best['best_step']})."), ""]
        if base_row is not None:
            if base_row is best:
                lines += [f"No searched config beat the base config ({_fmt_values(base_vals)}).", ""]
            elif base_row["best"] is not None:
                lines += [(f"The base config ({_fmt_values(base_vals)}, trial `{base_row['trial_id']}`) scored "
                          f"{base_row['best']:.4f}: the best trial is {best['best'] - base_row['best']:+.4f}."), ""]
    keys = list(settings.search_space)
    lines += ["| trial | " + " | ".join(keys) + f" | best {metric} | at examples | examples seen | ended |",
              "|---|" + "---|" * len(keys) + "---|---|---|---|"]
    for row in sorted(rows, key=lambda r: (r["best"] is None, -(r["best"] or 0) if settings.mode == "max"
                                           else (r["best"] or 0))):
        mark = " (base config)" if row is base_row else ""
        score = f"{row['best']:.4f}" if row["best"] is not None else "-"
        lines.append(f"| `{row['trial_id']}`{mark} | " + " | ".join(_fmt(row["values"][k]) for k in keys)
                     + f" | {score} | {row['best_examples'] or '-'} | {row['examples_seen']} | {row['ended']} |")
    files["learning_curves"] = _plot_curves(rows, metric, folder_path / "learning_curves.png")
    # x: a continuous key if there is one (lr), colour: a choice/grid key (batch size)
    listed = [k for k in keys if next(iter(settings.search_space[k])) in ("choice", "grid")]
    plot_keys = [k for k in keys if k not in listed][:1] + listed if len(listed) < len(keys) else keys
    files["search_space"] = _plot_space(rows, plot_keys, metric, folder_path / "search_space.png")
    lines += ["", "![learning curves](learning_curves.png)", "", "![search space](search_space.png)", ""]
    if best is not None:
        trial_dir = folder_path / "trials" / f"train-{best['trial_id']}"
        checkpoint = trial_dir / f"step-{best['best_step']:07d}"
        cfg_dict = resolved_trial_config(best["config"], private, run_name=f"{settings.name}-best").to_dict()
        cfg_dict["storage_path"] = base.storage_path
        files["best_config"] = str(folder_path / "best_config.yaml")
        Path(files["best_config"]).write_text(
            f"# the best trial of search {settings.name!r} ({metric} {best['best']:.4f}): python -m train --config "
            f"{(remote or str(folder_path)).rstrip('/')}/best_config.yaml\n" + yaml.safe_dump(cfg_dict, sort_keys=False))
        if remote is not None:  # the trials' checkpoints are in the bucket: the model is copied from there
            import fsspec

            fs, source = fsspec.core.url_to_fs(f"{remote.rstrip('/')}/{checkpoint.relative_to(folder_path)}/model")
            kept = fs.isdir(source)
        else:
            kept = (checkpoint / "model").is_dir()
        if kept:
            files["best_model"] = str(folder_path / "best_model")
            shutil.rmtree(files["best_model"], ignore_errors=True)
            if remote is not None:
                fs.get(source.rstrip("/") + "/", files["best_model"] + "/", recursive=True)
            else:
                shutil.copytree(checkpoint / "model", files["best_model"])
            lines += [(f"Best model (trial `{best['trial_id']}`, step {best['best_step']}): `best_model/`; its "
                      "config: `best_config.yaml`."), ""]
        else:
            lines += [f"The best checkpoint ({checkpoint}) was not kept: no `best_model/`.", ""]
            log(f"[tune] warning: the best checkpoint {checkpoint} was not kept (keep_checkpoints)")
    files["report"] = str(folder_path / "search_report.md")
    Path(files["report"]).write_text("\n".join(lines))
    log(f"[tune] report: {(remote or str(folder_path)).rstrip('/')}/search_report.md")
    return SearchOutcome(best_config=dict(best["values"]) if best else {},
                         best_metrics={metric: best["best"], "examples_seen": best["best_examples"],
                                       "step": best["best_step"], "trial_id": best["trial_id"]} if best else {},
                         metric=metric, results=results, folder=str(folder_path), files=files, trials=rows)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _fmt_values(values: dict) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())


def _plot_curves(rows, metric, path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in rows:
        if row["curve"]:
            xs, ys = zip(*row["curve"])
            ax.plot(xs, ys, marker="o", ms=3, label=f"{row['trial_id']} {_fmt_values(row['values'])}")
    ax.set_xlabel("examples seen")
    ax.set_ylabel(metric)
    ax.set_title("dev score per trial")
    if any(r["curve"] for r in rows):
        ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _plot_space(rows, keys, metric, path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    scored = [r for r in rows if r["best"] is not None]
    if keys and scored:
        x_key = keys[0]
        colour_key = keys[1] if len(keys) > 1 else None
        xs = [float(r["values"][x_key]) for r in scored]
        ys = [r["best"] for r in scored]
        if colour_key:
            groups = sorted({r["values"][colour_key] for r in scored}, key=str)
            cmap = plt.get_cmap("viridis", max(len(groups), 2))
            for gi, g in enumerate(groups):
                pts = [(x, y) for x, y, r in zip(xs, ys, scored) if r["values"][colour_key] == g]
                ax.scatter(*zip(*pts), color=cmap(gi), label=f"{colour_key}={_fmt(g)}", s=40)
            ax.legend(fontsize=8)
        else:
            ax.scatter(xs, ys, s=40)
        if x_key in ("lr", "temperature") and min(xs) > 0:
            ax.set_xscale("log")
        ax.set_xlabel(x_key)
    ax.set_ylabel(f"best {metric}")
    ax.set_title("search space")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)

