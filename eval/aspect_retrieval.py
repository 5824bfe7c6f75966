"""Aspect retrieval (AspectCSE §6.1; Ostendorff et al. 2022, ``eval_cli.py``): P@k, R@k, MRR@k per aspect.

Input: an ``aspect_docs`` set folder (``setformat.schemas.ASPECT_DOCS``: one row
per (document, aspect) with the document's label ids on that aspect) and
any encoder. Protocol, per aspect:

* embed that aspect's documents (each distinct ``qid`` once; a document in
  several aspects is embedded once for all) and L2-normalise;
* a document is *relevant* to a seed when it shares at least one label with
  it on that aspect; every document with at least one relevant document is
  a seed;
* for each seed, rank the aspect's other documents by cosine (the seed
  itself excluded; ties broken by set order) and take the top k:
  P@k = hits / retrieved, R@k = hits / |relevant|, MRR@k = 1 / rank of the
  first hit within k (0 if none); averaged over the seeds;
* k ∈ {5, 10, 25, 50}. When k exceeds the pool (n_docs − 1 candidates) the
  whole pool is taken and P@k divides by what was retrieved, min(k, pool), as
  Ostendorff's ``eval_cli`` does.

Result: ``per_aspect[aspect]`` = ``{n_docs, n_seeds, P@k, R@k, MRR@k ...}``
(fractions) and, at the top level, each metric's unweighted mean over the
aspects that have seeds (``P@10`` etc.: one number for model selection / Tune).
``limit``: the first N documents of each aspect (set order).
``plots``: a folder; one t-SNE PNG per aspect (:func:`eval.plots.label_tsne`).
:func:`compare_models_tsne` draws a generic and an aspect model side by side.

The reader and the metrics (``read_aspect_docs``, ``AspectDocs``, ``embed_aspects``,
``retrieval_metrics``, ``retrieval_by_aspect``, ...) live in ``score.aspects``: AspectCSE's dev
metric ``aspect_p10`` (``score.dev_metrics``: this task's ``P@10``) scores with them too.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from eval.plots import label_tsne
from score.aspects import ASPECT_COLUMNS, KS, embed_aspects, read_aspect_docs, retrieval_by_aspect


def check_aspect_data(data: str | Path, split: str = "test", **_) -> None:
    """Cheap check before a model loads: the folder exists and holds an ``aspect_docs`` set."""
    from setformat.io import check_set_folder

    check_set_folder(data, "aspect_docs", required=ASPECT_COLUMNS)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "aspect"


def evaluate_aspect_retrieval(model, data: str | Path, split: str = "test", *, batch_size: int = 64,
                              limit: int | None = None, plots: str | Path | None = None, ks=KS, **_) -> dict:
    """P@k / R@k / MRR@k per aspect of ``data`` (an aspect_docs set folder) and their means over aspects."""
    started = time.perf_counter()
    aspects = read_aspect_docs(data, limit)
    embeddings = embed_aspects(model, aspects, batch_size)
    per_aspect, means = retrieval_by_aspect(embeddings, aspects, ks)
    if not means:
        raise ValueError(f"{data}: no document shares a label with another on its aspect; nothing to retrieve")
    result = {"task": "aspect_retrieval", "split": split, "data": str(data), "ks": list(ks), **means}
    result.update({"per_aspect": per_aspect, "n_aspects": len(per_aspect),
                   "n_docs": len({q for d in aspects.values() for q in d.qids}),
                   "n_seeds": sum(m["n_seeds"] for m in per_aspect.values()), "plots": []})
    if plots:
        name = model_name(model)
        for a, docs in aspects.items():
            path = Path(plots) / f"aspect_tsne_{_slug(a)}.png"
            if label_tsne([embeddings[a]], docs.labels, path, titles=[f"{name}: aspect {a}"]) is not None:
                result["plots"].append(str(path))
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def model_name(model) -> str:
    """A short name for titles: the model's folder when it knows it (TrainedModel), else "model"."""
    from eval.plots import model_label

    return model_label(model) if getattr(model, "path", None) else "model"


def compare_models_tsne(models: dict, data: str | Path, aspect: str, path: str | Path, *, batch_size: int = 64,
                        limit: int | None = None, top_labels: int = 10, label_names: dict | None = None) -> Path:
    """One PNG, one t-SNE panel per model (e.g. ``{"generic SimCSE": m1, "AspectCSE country": m2}``) of the
    ``aspect`` documents of ``data``, coloured alike by label (the paper's Figures 3–4)."""
    aspects = read_aspect_docs(data, limit)
    if aspect not in aspects:
        raise ValueError(f"{data}: no documents for aspect {aspect!r}; aspects: {sorted(aspects)}")
    docs = aspects[aspect]
    panels = [embed_aspects(m, {aspect: docs}, batch_size)[aspect] for m in models.values()]
    titles = [f"{name}: aspect {aspect}" for name in models]
    out = label_tsne(panels, docs.labels, path, titles=titles, top_labels=top_labels, label_names=label_names)
    if out is None:
        raise ValueError(f"aspect {aspect!r} has {len(docs)} documents: too few for a t-SNE plot")
    return out
