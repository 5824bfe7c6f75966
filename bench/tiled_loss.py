"""The tiled losses on CPU: exactness for every method, memory at 65,536 x 65,536, time beside the dense loss.

    python bench/tiled_loss.py [--smoke]      # bench/gpu.py merges the same figures under "tiled_loss"

* ``tiled_equals_dense``: every method's loss (and every option that changes its blocks) at 1,000
  anchors x 1,000 (or 2,000 / 3,000) candidates, d = 64, float32, tiles of 384 (no multiple of it):
  the loss and the gradient of every input against the dense oracle (``tests/dense_losses.py``:
  every logit materialised, then cross-entropy), to 1e-5 (gradients relative to the largest entry).
* ``loss_peak_gb_65536x384``: one MNRL loss forward + backward (``info_nce``, what SimCSE and MNRL
  use) at B = N = 65,536, d = 384, default tile, in a fresh subprocess: its peak resident memory
  (``VmHWM``, reset just before) minus the resident memory before the inputs were made. The inputs (two 65,536 x 384
  float32 matrices, 0.1 GB each), their unit copies and their gradients are counted in it. Beside it
  ``dense_loss_gb_65536x384``: the dense loss's logits, softmax and logit gradient (3 x B x N x 4
  bytes), computed, not run (it would not fit this machine).
* ``loss_seconds_4096``, ``loss_seconds_8192``: the same loss at B = N = 4,096 and 8,192, d = 384,
  forward + backward, dense and in tiles of B/4 and B/2 (best of 3 each, one process, all torch
  threads): the default tile (``train.methods.tiled.DEFAULT_LOSS_TILE``) is chosen from this.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402
from bench.loss_checks import loss_figures  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes (8,192 pairs for the memory probe)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    figures = loss_figures(smoke=args.smoke)
    figures["wall_s"] = round(time.perf_counter() - t0, 1)
    figures["max_rss_gb_parent"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    emit(figures)
    return 0 if figures["tiled_equals_dense"]["all"] else 1


if __name__ == "__main__":
    sys.exit(main())
