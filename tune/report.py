"""What a search leaves for its user, in ``{storage}/{name}/``:

* ``search_report.md`` — one row per trial: its searched values, its best dev score and the examples
  seen when it was scored, its difference to its untrained encoder and to the base config, examples
  seen in all, and how it ended (ran to its own budget, stopped by ASHA at so many of its budget's examples,
  error); the first rows are the untrained encoders (every trial's step 0, one per encoder shape, scored by
  the same evaluation pool on the same dev data), the base config's own trial is marked with the examples it
  trained on of its budget, the report says whether the best trial beat each of them (a trial not above its
  untrained encoder is marked ``≤ untrained``), and the evaluation pool's counts (timeouts, retries,
  checkpoints left unscored);
* ``learning_curves.png`` — each trial's dev score against examples seen, with the untrained encoder's
  and the base config's best score as horizontal lines;
  ``search_space.png`` — best score against the first searched key (log scale for lr), coloured by
  the second (e.g. batch size);
* ``best_config.yaml`` — the base training config with the best trial's values (and the trial's
  ``max_steps`` / ``checkpoint_every_steps`` for its batch size): ``python -m train --config`` runs it
  as is;
* ``best_model/`` — the best trial's best checkpoint, as a sentence-transformers folder (with the
  method's heads).
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.publish import put_files

from infra.storage import is_uri
from train.checkpoints import dir_name
from train.config import TrainConfig
from tune.trials import base_values, resolved_trial_config

log = logging.getLogger(__name__)


@dataclass
class SearchOutcome:
    best_config: dict  # the searched keys' values of the best trial
    best_metrics: dict  # the best trial's best-scored report (metric, step, examples_seen, ...)
    metric: str
    results: Any  # Tune's ResultGrid
    folder: str  # {storage}/{name}
    files: dict = field(default_factory=dict)  # what tune.report wrote: report, plots, best config, best model
    trials: list = field(default_factory=list)  # tune.report.trial_rows
    untrained: dict = field(default_factory=dict)  # the untrained encoder's dev score (tune.scorers)
    base_config_score: float | None = None  # the base config's trial's best (None: not in the search)
    # the base config's trial: {"trial_id", "score", "examples_seen", "budget", "full_budget"} (empty: not in it)
    base_config: dict = field(default_factory=dict)
    pool: dict = field(default_factory=dict)  # the evaluation pool's counts (tune.scorers.EvalPool.stats)
    baseline_line: str = ""  # one line: the best trial against the untrained encoder and the base config


def trial_id_of(result) -> str:
    return (result.metrics or {}).get("trial_id") or Path(str(result.path)).name.removeprefix("train-")


def trial_budget(config: dict, private: dict, max_t: int | None) -> int | None:
    """The examples a trial of ``config`` was to train on: its own schedule over the search's rows
    (``tune.trials.trained_examples``), else the search's cap for its batch size, else ``max_t``."""
    from tune.trials import trained_examples

    if private.get("num_rows"):
        try:
            return trained_examples(resolved_trial_config(config, private, "budget"), private["num_rows"])
        except Exception:  # noqa: BLE001 - a config that no longer resolves: the cap below
            pass
    batch = config.get("batch_size") or private.get("base", {}).get("batch_size")
    if private.get("max_examples") and batch:
        return max(1, private["max_examples"] // batch) * batch
    return max_t


def trial_rows(results, settings, metric: str, max_t: int | None, private: dict | None = None) -> list[dict]:
    """One dict per trial: id, values, best score (and where), examples seen of its budget, how it ended, its
    curve."""
    rows = []
    for result in results:
        config = result.config or {}
        frame = result.metrics_dataframe
        values = {k: config.get(k) for k in settings.search_space}
        row = {"trial_id": trial_id_of(result), "values": values, "config": config,
               "best": None, "best_step": None, "best_examples": None, "examples_seen": 0, "curve": [],
               "budget": trial_budget(config, private or {}, max_t),
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
        row["full_budget"] = bool(row["budget"] and row["examples_seen"] >= row["budget"])
        row["ended"] = ("error" if row["error"] else "ran to the end" if row["full_budget"]
                        else f"stopped at {row['examples_seen']} of {row['budget'] or '?'} examples")
        rows.append(row)
    return rows


def _better(a, b, mode) -> bool:
    return a is not None and (b is None or (a > b if mode == "max" else a < b))


def write_search_report(results, base: TrainConfig, settings, metric: str, folder: str, private: dict,
                        max_t: int | None = None, untrained: dict | None = None, untrained_by_trial: dict | None = None,
                        pool_stats: dict | None = None):
    """The search's report, plots, ``best_config.yaml`` and ``best_model/`` in ``folder`` (a local folder or a
    URI: then written in a local staging folder and uploaded). ``untrained``: the base config's untrained
    encoder's dev score (``tune.untrained.score_untrained_encoder``: ``{"score", "model", ...}`` or ``{"score":
    None, "error"}``); ``untrained_by_trial``: ``{trial id: the untrained encoder of its shape}``, for trials
    whose searched values make another encoder (``tune.untrained.score_untrained_encoders``); ``pool_stats``:
    the evaluation pool's counts (scores, timeouts, retries, checkpoints left unscored)."""
    kwargs = {"untrained": untrained, "untrained_by_trial": untrained_by_trial, "pool_stats": pool_stats}
    if not is_uri(folder):
        return _write_search_report(results, base, settings, metric, folder, private, max_t, **kwargs)
    with tempfile.TemporaryDirectory(prefix="structcse-search-") as staging:
        outcome = _write_search_report(results, base, settings, metric, staging, private, max_t, remote=folder,
                                       **kwargs)
        put_files(staging, folder)  # the folder holds the trials too: files added, nothing replaced
    outcome.folder = folder
    outcome.files = {k: v.replace(staging, folder.rstrip("/"), 1) for k, v in outcome.files.items()}
    return outcome


def _delta(a, b) -> float | None:
    return a - b if a is not None and b is not None else None


def _signed(x: float | None) -> str:
    return f"{x:+.4f}" if x is not None else "-"


def baseline_sentences(best: float | None, base_score: float | None, untrained: float | None, metric: str,
                       mode: str = "max", base_budget: str = "", untrained_shape: str = "") -> list[str]:
    """What the best trial is against the base config and the untrained encoder, in words; a best not above
    the untrained encoder is said in bold (training did not help). ``base_budget``: said beside the base
    config's score when it did not train on its whole budget; ``untrained_shape``: the best trial's encoder
    when it is not the base config's (a searched pooling, max_len, model or seed)."""
    if best is None:
        return []
    worse = (lambda d: d <= 0) if mode == "max" else (lambda d: d >= 0)
    out = []
    if base_score is not None:
        out.append(f"the best trial is {_signed(_delta(best, base_score))} over the base config ({base_score:.4f}"
                   f"{', ' + base_budget if base_budget else ''})")
    if untrained is not None:
        d = _delta(best, untrained)
        encoder = f"its untrained encoder ({untrained_shape}, {untrained:.4f})" if untrained_shape else \
            f"the untrained encoder ({untrained:.4f})"
        out.append(("" if out else "the best trial is ") + f"{_signed(d)} over {encoder}"
                   + (f": **≤ untrained: the best trial's {metric} is not above the encoder it started from**"
                      if worse(d) else ""))
    return out


def _shape_words(untrained: dict) -> str:
    return _fmt_values(untrained.get("shape") or {})


def _pool_line(stats: dict) -> str:
    """The evaluation pool's counts in one line: what was scored, what was not given in time and what then."""
    if not stats:
        return ""
    unscored = stats.get("unscored") or []
    line = (f"Evaluation pool: {sum(stats.get('scored') or [])} scores by {stats.get('size')} scorer(s); "
            f"{stats.get('timed_out', 0)} request(s) not answered within validation_timeout_s (dropped from the "
            f"queue, or their scorer stopped and replaced), {stats.get('retried', 0)} asked again, "
            f"{stats.get('cancelled', 0)} cancelled; {len(unscored)} checkpoint(s) left unscored")
    if unscored:
        line += ": " + ", ".join(f"trial `{u.get('trial_id')}` step {u.get('step')}" for u in unscored) + \
            " (each failed its trial)"
    return line + "."


@dataclass
class _Standing:
    """Where a search's trials stand: each trial's row (``trial_rows``), the best, the base config's own trial,
    and the untrained encoders they are measured against (the base config's; one per other encoder shape)."""

    settings: Any
    metric: str
    rows: list
    best: dict | None
    base_values: dict
    base_row: dict | None
    untrained: dict
    by_trial: dict
    other_shapes: dict  # words naming an encoder shape -> its untrained encoder's score

    @property
    def base_score(self) -> float | None:
        return self.base_row["best"] if self.base_row is not None else None

    def own_untrained(self, row) -> dict:
        return self.by_trial.get(row["trial_id"]) or self.untrained


def _standing(results, base: TrainConfig, settings, metric: str, max_t, private, untrained, by_trial) -> _Standing:
    rows = trial_rows(results, settings, metric, max_t, private)
    best = None
    for row in rows:
        if _better(row["best"], best["best"] if best else None, settings.mode):
            best = row
    values = base_values(base, settings)
    base_row = next((r for r in rows if r["values"] == values), None) if settings.include_base_config else None
    other_shapes = {}
    for u in (by_trial or {}).values():
        if u.get("shape") and u.get("score") is not None:
            other_shapes.setdefault(_shape_words(u), u)
    return _Standing(settings, metric, rows, best, values, base_row, untrained or {}, by_trial or {}, other_shapes)


def _write_search_report(results, base: TrainConfig, settings, metric: str, folder: str, private: dict,
                         max_t: int | None, remote: str | None = None, untrained: dict | None = None,
                         untrained_by_trial: dict | None = None, pool_stats: dict | None = None):
    folder_path = Path(folder)
    standing = _standing(results, base, settings, metric, max_t, private, untrained, untrained_by_trial)
    best = standing.best
    lines, base_budget = _introduction(standing, base, max_t)
    best_untrained = standing.own_untrained(best) if best else standing.untrained
    words = baseline_sentences(best["best"] if best else None, standing.base_score, best_untrained.get("score"),
                               metric, settings.mode, base_budget=base_budget,
                               untrained_shape=_shape_words(best_untrained))
    lines += _best_lines(standing, words, best_untrained)
    lines += _trial_table(standing)
    if _pool_line(pool_stats or {}):
        lines += ["", _pool_line(pool_stats)]
    files = _plots(standing, folder_path)
    lines += ["", "![learning curves](learning_curves.png)", "", "![search space](search_space.png)", ""]
    if best is not None:
        lines += _keep_best(standing, base, private, folder_path, remote, files)
    files["report"] = str(folder_path / "search_report.md")
    Path(files["report"]).write_text("\n".join(lines))
    log.info(f"[tune] report: {(remote or str(folder_path)).rstrip('/')}/search_report.md")
    return _outcome(standing, results, folder_path, files, words, best_untrained, pool_stats)


def _introduction(standing: _Standing, base: TrainConfig, max_t) -> tuple[list[str], str]:
    """The report's heading, what was searched and on what, and the baselines' scores: the untrained encoders
    and the base config's trial (with how much of its budget it trained). Returns (lines, the base config's
    budget in words when it was stopped early, else "")."""
    settings, metric, rows = standing.settings, standing.metric, standing.rows
    untrained, base_row, base_score = standing.untrained, standing.base_row, standing.base_score
    lines = [f"# Search `{settings.name}`: {base.method}, {metric} ({settings.mode})", "",
             (f"{len(rows)} trials, searcher {settings.searcher}, scheduler {settings.scheduler} (time attribute: "
             f"examples seen{f', max_t {max_t}' if max_t else ''}); examples seen by all trials: "
             f"{sum(r['examples_seen'] for r in rows)}."), "",
             (f"Split: dev (`{base.dev_data}`), the method's dev metric {metric}, each checkpoint scored by the "
              "search's evaluation pool with the model's own similarity; the untrained encoder by the same pool "
              "on the same data."), ""]
    if untrained.get("score") is not None:
        lines += [(f"Untrained encoder (`{untrained.get('model', base.model)}`, "
                   f"{untrained.get('pooling', base.pooling)} pooling, no training: every trial's step 0): {metric} "
                   f"**{untrained['score']:.4f}**."), ""]
    else:
        lines += [f"Untrained encoder: not scored ({untrained.get('error') or 'no score given'}).", ""]
    for words_of_shape, u in standing.other_shapes.items():
        lines += [f"Untrained encoder with {words_of_shape} (the step 0 of the trials with those values): {metric} "
                  f"**{u['score']:.4f}**.", ""]
    base_budget = ""
    if base_row is not None and base_score is not None:
        if base_row["full_budget"]:
            trained = f"It trained on {base_row['examples_seen']} of its {base_row['budget']} examples: its whole budget."
        else:
            base_budget = f"stopped at {base_row['examples_seen']} of its {base_row['budget'] or '?'} examples"
            trained = (f"It was {base_budget} ({base_row['ended']}): it is compared as it was then, not trained to "
                       "its budget.")
        lines += [f"Base config ({_fmt_values(standing.base_values)}, trial `{base_row['trial_id']}`): {metric} "
                  f"**{base_score:.4f}**. {trained}", ""]
    elif settings.include_base_config:
        lines += ["Base config: not among the scored trials.", ""]
    return lines, base_budget


def _best_lines(standing: _Standing, words: list[str], best_untrained: dict) -> list[str]:
    """The best trial, and what it beat."""
    best = standing.best
    if best is None:
        return ["**No trial was scored.**", ""]
    lines = [(f"Best: trial `{best['trial_id']}` with {_fmt_values(best['values'])}: {standing.metric} "
              f"**{best['best']:.4f}** at {best['best_examples']} examples (step {best['best_step']})."), ""]
    if standing.base_row is best:
        lines += [f"No searched config beat the base config ({_fmt_values(standing.base_values)})"
                  + (f"; the best trial is {words[-1]}." if best_untrained.get("score") is not None else "."), ""]
    elif words:
        lines += [words[0][0].upper() + words[0][1:] + ("; " + "; ".join(words[1:]) if words[1:] else "") + ".", ""]
    return lines


def _trial_table(standing: _Standing) -> list[str]:
    """One row per untrained encoder, then per trial, best first."""
    settings, metric, base_row, base_score = standing.settings, standing.metric, standing.base_row, standing.base_score
    worse = (lambda d: d <= 0) if settings.mode == "max" else (lambda d: d >= 0)
    keys = list(settings.search_space)
    lines = ["| trial | " + " | ".join(keys) + f" | best {metric} | Δ vs untrained | Δ vs base config "
             "| vs untrained | at examples | examples seen | ended |",
             "|---|" + "---|" * len(keys) + "---|---|---|---|---|---|---|"]
    untrained = standing.untrained
    for label, u in ([("untrained encoder (no training)", untrained)] if untrained.get("score") is not None else []) + \
            [(f"untrained encoder ({words_of_shape}, no training)", u) for words_of_shape, u in standing.other_shapes.items()]:
        lines.append(f"| {label} | " + " | ".join("-" for _ in keys)
                     + f" | {u['score']:.4f} | - | {_signed(_delta(u['score'], base_score))} | untrained "
                     "| 0 | 0 | - |")
    for row in sorted(standing.rows, key=lambda r: (r["best"] is None, -(r["best"] or 0) if settings.mode == "max"
                                                    else (r["best"] or 0))):
        mark = " (base config)" if row is base_row else ""
        score = f"{row['best']:.4f}" if row["best"] is not None else "-"
        d_untrained = _delta(row["best"], standing.own_untrained(row).get("score"))
        versus = "-" if d_untrained is None else "≤ untrained" if worse(d_untrained) else "above"
        lines.append(f"| `{row['trial_id']}`{mark} | " + " | ".join(_fmt(row["values"][k]) for k in keys)
                     + f" | {score} | {_signed(d_untrained)} | "
                     + ("base" if row is base_row else _signed(_delta(row["best"], base_score)))
                     + f" | {versus} | {row['best_examples'] or '-'} | {row['examples_seen']} | {row['ended']} |")
    return lines


def _plots(standing: _Standing, folder: Path) -> dict:
    """The learning curves and the search space, as PNGs in ``folder``: ``{name: path}``."""
    keys = list(standing.settings.search_space)
    files = {"learning_curves": _plot_curves(standing.rows, standing.metric, folder / "learning_curves.png",
                                             untrained=standing.untrained.get("score"), base_row=standing.base_row)}
    # x: a continuous key if there is one (lr), colour: a choice/grid key (batch size)
    listed = [k for k in keys if next(iter(standing.settings.search_space[k])) in ("choice", "grid")]
    plot_keys = [k for k in keys if k not in listed][:1] + listed if len(listed) < len(keys) else keys
    files["search_space"] = _plot_space(standing.rows, plot_keys, standing.metric, folder / "search_space.png")
    return files


def _keep_best(standing: _Standing, base: TrainConfig, private: dict, folder: Path, remote: str | None,
               files: dict) -> list[str]:
    """``best_config.yaml`` and ``best_model/`` (published whole, from a checkpoint that is whole) beside the
    report; adds them to ``files``, returns the report's lines about them."""
    best, settings, metric = standing.best, standing.settings, standing.metric
    checkpoint = folder / "trials" / f"train-{best['trial_id']}" / dir_name(best["best_step"])
    cfg_dict = resolved_trial_config(best["config"], private, run_name=f"{settings.name}-best").to_dict()
    cfg_dict["storage_path"] = base.storage_path
    files["best_config"] = str(folder / "best_config.yaml")
    Path(files["best_config"]).write_text(
        f"# the best trial of search {settings.name!r} ({metric} {best['best']:.4f}): python -m train --config "
        f"{(remote or str(folder)).rstrip('/')}/best_config.yaml\n" + yaml.safe_dump(cfg_dict, sort_keys=False))
    from infra.publish import IncompleteError, check_complete
    from infra.storage import filesystem

    # the trials' checkpoints are in the bucket when there is one: the model is copied from there, from a
    # checkpoint that is whole (its _files.json checked, the published version it names)
    step_folder = f"{remote.rstrip('/')}/{checkpoint.relative_to(folder)}" if remote else str(checkpoint)
    try:
        whole = check_complete(step_folder, "checkpoint", require_manifest=True)
        fs, source = filesystem(f"{whole}/model")
        kept = fs.isdir(source)
    except (IncompleteError, FileNotFoundError):
        kept = False
    if not kept:
        log.warning(f"[tune] warning: the best checkpoint {checkpoint} was not kept (keep_checkpoints)")
        return [f"The best checkpoint ({checkpoint}) was not kept: no `best_model/`.", ""]
    from infra.publish import publish_folder

    files["best_model"] = str(folder / "best_model")
    with tempfile.TemporaryDirectory(prefix="structcse-best-model-") as copied:
        model = Path(source)
        if remote is not None:
            model = Path(copied) / "model"
            fs.get(source.rstrip("/") + "/", f"{model}/", recursive=True)
        # whole or not at all: a search's rerun never leaves a mix of two trials' models
        publish_folder(model, f"{(remote or str(folder)).rstrip('/')}/best_model")
    return [(f"Best model (trial `{best['trial_id']}`, step {best['best_step']}): `best_model/`; its "
             "config: `best_config.yaml`."), ""]


def _outcome(standing: _Standing, results, folder: Path, files: dict, words: list[str], best_untrained: dict,
             pool_stats: dict | None) -> SearchOutcome:
    best, base_row, metric = standing.best, standing.base_row, standing.metric
    if best is None:
        line = "no trial was scored"
    elif base_row is not best:
        line = f"best {metric} {best['best']:.4f}: " + ("; ".join(words) if words else "no baseline scored")
    else:
        line = (f"best {metric} {best['best']:.4f} is the base config's own trial"
                + (f"; {words[-1]}" if best_untrained.get("score") is not None else ""))
    base_config = {} if base_row is None else {
        "trial_id": base_row["trial_id"], "score": standing.base_score, "examples_seen": base_row["examples_seen"],
        "budget": base_row["budget"], "full_budget": base_row["full_budget"], "ended": base_row["ended"]}
    return SearchOutcome(best_config=dict(best["values"]) if best else {},
                         best_metrics={metric: best["best"], "examples_seen": best["best_examples"],
                                       "step": best["best_step"], "trial_id": best["trial_id"]} if best else {},
                         metric=metric, results=results, folder=str(folder), files=files, trials=standing.rows,
                         untrained=dict(standing.untrained), base_config_score=standing.base_score,
                         baseline_line=line.replace("**", ""), base_config=base_config, pool=dict(pool_stats or {}))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _fmt_values(values: dict) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())


def _plot_curves(rows, metric, path: Path, untrained: float | None = None, base_row: dict | None = None) -> str:
    """Each trial's dev curve; the untrained encoder's score (dashed) and the base config's best (dotted) as
    horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in rows:
        if row["curve"]:
            xs, ys = zip(*row["curve"])
            mark = " (base config)" if row is base_row else ""
            ax.plot(xs, ys, marker="o", ms=3, label=f"{row['trial_id']}{mark} {_fmt_values(row['values'])}")
    if untrained is not None:
        ax.axhline(untrained, color="black", linestyle="--", linewidth=1,
                   label=f"untrained encoder (no training) {untrained:.4f}")
    if base_row is not None and base_row["best"] is not None:
        ax.axhline(base_row["best"], color="grey", linestyle=":", linewidth=1.2,
                   label=f"base config's best {base_row['best']:.4f}")
    ax.set_xlabel("examples seen")
    ax.set_ylabel(f"{metric} (dev)")
    ax.set_title("dev score per trial")
    if any(r["curve"] for r in rows) or untrained is not None:
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

