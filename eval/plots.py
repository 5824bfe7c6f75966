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
* :func:`label_tsne`: AspectCSE's Figures 3–6, documents' embeddings in 2-d
  (t-SNE) coloured by their label on one aspect; one panel per model, so a
  generic and an aspect model can be drawn side by side.

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


def _scatter(x, y, width: float, height: float, alpha: float):
    """(x, y as float64, figure, axes) with the points drawn; x and y must be equally long, not empty."""
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"need two non-empty arrays of equal length, got {x.size} and {y.size}")
    fig = _figure(width, height)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(x, y, s=6, alpha=alpha, linewidths=0)
    return x, y, fig, ax


def sts_scatter(predicted, gold, path: str | Path, title: str = "") -> Path:
    """PNG scatter of the model's similarity (y) against the gold score (x) of each STS pair."""
    _, _, fig, ax = _scatter(gold, predicted, 5, 4.5, 0.4)
    ax.set_xlabel("gold score")
    ax.set_ylabel("cosine similarity")
    ax.set_title(title or "STS: predicted vs gold", fontsize=10)
    return _save(fig, path)


def variance_scatter(premise_logdet, hypothesis_logdet, path: str | Path, title: str = "") -> Path:
    """PNG scatter of Σ log σ² of premise (x) vs hypothesis (y) per entailment pair, with y = x."""
    x, y, fig, ax = _scatter(premise_logdet, hypothesis_logdet, 5.5, 5.0, 0.5)
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
    """``folder/rse_relations.png``: the heatmap of an RSE model (a :class:`score.model.TrainedModel`)."""
    name = model_label(model)
    return relation_heatmap(model.relation_names, model.relation_table(), Path(folder) / "rse_relations.png",
                            title=f"{name}: RSE relations, cos(r_i, r_j)")


def tsne_2d(embeddings: np.ndarray, seed: int = 0) -> np.ndarray:
    """(n, 2) t-SNE of ``embeddings`` (cosine metric, PCA init, seeded); perplexity min(30, (n - 1) / 3),
    since scikit-learn needs perplexity < n and the usual 30 is too large for small sets."""
    from sklearn.manifold import TSNE

    x = np.asarray(embeddings, dtype=np.float64)
    perplexity = max(1.0, min(30.0, (len(x) - 1) / 3))
    return TSNE(n_components=2, perplexity=perplexity, metric="cosine", init="pca",
                random_state=seed).fit_transform(x)


def label_colours(labels: list, top_labels: int = 10) -> tuple[list[str], np.ndarray]:
    """The ``top_labels`` most frequent labels (ties by name) and, per document, the index of its most
    frequent label among them (-1: none of them, drawn grey). ``labels``: one set of labels per document."""
    from collections import Counter

    counts = Counter(label for labs in labels for label in set(labs))
    top = [label for label, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_labels]]
    rank = {label: i for i, label in enumerate(top)}
    colour = np.array([min((rank[label] for label in labs if label in rank), default=-1) for labs in labels])
    return top, colour


def label_tsne(panels: list, labels: list, path: str | Path, *, titles: list[str] | None = None,
               top_labels: int = 10, label_names: dict | None = None, seed: int = 0) -> Path | None:
    """PNG of one t-SNE scatter per embedding matrix in ``panels`` (same documents, e.g. two models), the
    points coloured by label (the most frequent ``top_labels``; the rest grey). None when there are fewer
    than 3 documents (nothing to lay out)."""
    n = len(labels)
    if n < 3:
        return None
    if any(len(p) != n for p in panels):
        raise ValueError(f"every panel needs {n} rows (one per document), got {[len(p) for p in panels]}")
    top, colour = label_colours(labels, top_labels)
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(top) <= 10 else "tab20"]
    palette = [cmap(i % cmap.N) for i in range(len(top))]
    names = label_names or {}
    fig = _figure(5.5 * len(panels) + 2.0, 5.0)
    for p, emb in enumerate(panels):
        xy = tsne_2d(emb, seed)
        ax = fig.add_subplot(1, len(panels), p + 1)
        rest = colour < 0
        ax.scatter(xy[rest, 0], xy[rest, 1], s=8, c="lightgrey", linewidths=0, label="other" if p == 0 else None)
        for i, label in enumerate(top):
            mask = colour == i
            ax.scatter(xy[mask, 0], xy[mask, 1], s=10, color=palette[i], linewidths=0,
                       label=str(names.get(label, label)) if p == 0 else None)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title((titles[p] if titles else f"panel {p + 1}") + f"  (n={n})", fontsize=10)
    fig.legend(loc="center right", fontsize=8, frameon=False, markerscale=2)
    fig.subplots_adjust(right=1 - 1.8 / (5.5 * len(panels) + 2.0))
    return _save(fig, path)
