"""Pictures of what the pair methods learn, as PNG files (matplotlib, Agg canvas, no display needed).

* :func:`relation_heatmap`: RSE's relation vectors, cosine similarity of every
  pair of relations (relations × relations): the RSE paper's Figure 4
  ("Relation Similarity"), where similarity-like relations (duplicate
  question & paraphrase, entailment & same-sent) come out close and
  qa-entailment apart.
* :func:`variance_scatter`: GaussCSE's premise-vs-hypothesis "size",
  Σ_d log σ²_d of the premise (x) against the hypothesis (y) for entailment
  pairs, with the diagonal; the points below it are the pairs whose premise
  got the broader Gaussian (the reference code's ``det_acc``).

Both use ``matplotlib.figure.Figure`` with an Agg canvas directly (no pyplot
global state), so they are safe in workers and tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def relation_cosines(table: np.ndarray) -> np.ndarray:
    """(R, R) cosine similarity of the rows of ``table`` (the relation vectors r_k)."""
    t = np.asarray(table, dtype=np.float64)
    t = t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
    return t @ t.T


def relation_heatmap(names: list[str], table: np.ndarray, path: str | Path, title: str = "") -> Path:
    """PNG heatmap of cos(r_i, r_j) over the relations ``names`` (rows of ``table``)."""
    if len(names) != len(table):
        raise ValueError(f"{len(names)} relation names for {len(table)} relation vectors")
    sim = relation_cosines(table)
    n = len(names)
    fig = _figure(2.5 + 0.8 * n, 1.5 + 0.7 * n)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(sim, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(n), names, rotation=45, ha="right")
    ax.set_yticks(range(n), names)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{sim[i, j]:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if abs(sim[i, j]) > 0.6 else "black")
    fig.colorbar(image, ax=ax, label="cosine")
    ax.set_title(title or "RSE relation embeddings: cos(r_i, r_j)", fontsize=10)
    return _save(fig, path)


def variance_scatter(premise_logdet, hypothesis_logdet, path: str | Path, title: str = "") -> Path:
    """PNG scatter of Σ log σ² of premise (x) vs hypothesis (y) per entailment pair, with y = x."""
    x = np.asarray(premise_logdet, dtype=np.float64).ravel()
    y = np.asarray(hypothesis_logdet, dtype=np.float64).ravel()
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"need two non-empty arrays of equal length, got {x.size} and {y.size}")
    fig = _figure(5.5, 5.0)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(x, y, s=6, alpha=0.5, linewidths=0)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    pad = 0.05 * (hi - lo) or 1.0
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="black", linewidth=1, label="y = x")
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("premise  Σ log σ²")
    ax.set_ylabel("hypothesis  Σ log σ²")
    broader = float(np.mean(x > y))
    ax.set_title((title + "\n" if title else "GaussCSE entailment pairs: ")
                 + f"premise broader in {100 * broader:.1f}%", fontsize=10)
    ax.legend(loc="upper left")
    return _save(fig, path)


def model_label(model) -> str:
    """A short name for a model in titles: its folder, or the run folder for ``<run>/model``."""
    path = Path(str(model.path or "model"))
    return path.parent.name if path.name == "model" and path.parent.name else path.name


def rse_relation_plot(model, folder: str | Path) -> Path:
    """``folder/rse_relations.png``: the heatmap of an RSE model (a :class:`train.model.TrainedModel`)."""
    name = model_label(model)
    return relation_heatmap(model.relation_names, model.relation_table(), Path(folder) / "rse_relations.png",
                            title=f"{name}: RSE relations, cos(r_i, r_j)")
