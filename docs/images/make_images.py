"""The site's pictures that are not copied from a run as they are.

    python docs/images/make_images.py                       # pipeline.png only
    python docs/images/make_images.py --demo demo_out       # and learning_curve.png from the demo's runs

* ``pipeline.png``: the stages and what passes between them (matplotlib, no other tool);
* ``learning_curve.png``: training loss and dev score per step of the demo's SimCSE-unsup and EASE runs,
  read from their TensorBoard files (``runs/<name>/tensorboard``).

The other pictures on the site are written by the commands themselves and copied here: ``eval`` with
``--plots DIR`` (``sts_scatter.png``, ``gausscse_direction.png``, ``rse_relations.png``, ``aspect_tsne.png``),
the demo's report (``eval_report_sts.png``) and its Tune search (``tune_learning_curves.png``).
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent


def pipeline(out: Path) -> None:
    fig, ax = plt.subplots(figsize=(9.6, 3.4), dpi=100)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 36)
    ax.axis("off")

    def box(x, y, w, h, title, sub, color, size=10.5):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.4,rounding_size=1.2",
                                    fc=color, ec="#37474f", lw=1.1))
        ax.text(x + w / 2, y + h * 0.66, title, ha="center", va="center", fontsize=size, weight="bold")
        ax.text(x + w / 2, y + h * 0.28, sub, ha="center", va="center", fontsize=7.6, color="#37474f")

    def arrow(x0, y0, x1, y1):
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=13, lw=1.2,
                                     color="#37474f"))

    src = "#eceff1"
    box(1, 25, 18, 8, "Wikipedia + Wikidata", "dumps (.xml.bz2, .json.gz)", src, size=9)
    box(1, 14, 18, 8, "sentence pairs", "Hub datasets, jsonl/csv", src, size=9)
    box(1, 3, 18, 8, "BATS + WordNet", "analogies, definitions", src, size=9)
    box(24, 14, 14, 8, "ingest", "Ray Data", "#bbdefb")
    box(44, 14, 15, 8, "sets", "parquet + manifest", "#fff9c4")
    box(65, 21, 13, 8, "train", "Ray Train", "#c8e6c9")
    box(65, 5, 13, 8, "tune", "Ray Tune", "#c8e6c9")
    box(84, 21, 14, 8, "model folder", "ST + heads", "#fff9c4")
    box(84, 5, 14, 8, "eval", "scores, report", "#ffe0b2")
    for y in (29, 18, 7):
        arrow(19.8, y, 23.6, 18)
    arrow(38.6, 18, 43.6, 18)
    arrow(59.6, 19, 64.6, 25)
    arrow(59.6, 17, 64.6, 9)
    arrow(78.6, 25, 83.6, 25)
    arrow(91, 20.6, 91, 13.4)
    arrow(78.6, 9, 83.6, 9)
    ax.text(71.5, 16.6, "trials", ha="center", fontsize=7.5, color="#37474f")
    ax.annotate("", xy=(71.5, 20.6), xytext=(71.5, 13.4),
                arrowprops=dict(arrowstyle="-|>", color="#37474f", lw=1.0, ls="--"))
    fig.tight_layout(pad=0.2)
    fig.savefig(out)
    plt.close(fig)


def _scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(glob.glob(str(run / "tensorboard" / "*tfevents*"))):
        acc = EventAccumulator(path)
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def learning_curve(demo: Path, out: Path) -> None:
    fig, (loss_ax, dev_ax) = plt.subplots(1, 2, figsize=(9.6, 3.3), dpi=100)
    for name, color in (("simcse_unsup", "#1f77b4"), ("ease", "#d62728")):
        scalars = _scalars(demo / "runs" / name)
        steps, values = zip(*sorted(scalars["train/loss"]))
        loss_ax.plot(steps, values, marker=".", color=color, label=name)
        steps, values = zip(*sorted(scalars["dev/dev_spearman"]))
        dev_ax.plot(steps, values, marker="o", color=color, label=name)
    loss_ax.set(title="train/loss", xlabel="optimizer step")
    dev_ax.set(title="dev/dev_spearman (the demo world's STS dev)", xlabel="optimizer step")
    for ax in (loss_ax, dev_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("tensorboard --logdir demo_out/runs: the demo's SimCSE-unsup and EASE runs", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", type=Path, help="the demo's output folder (structcse demo --out DIR)")
    args = parser.parse_args(argv)
    pipeline(HERE / "pipeline.png")
    if args.demo:
        learning_curve(args.demo, HERE / "learning_curve.png")


if __name__ == "__main__":
    main()
