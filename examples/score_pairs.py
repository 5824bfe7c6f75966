"""Score sentence pairs with each method's own similarity, beside cosine.

    python examples/score_pairs.py demo_out

GaussCSE represents a sentence as a Gaussian and scores a pair by a KL-divergence similarity (and, one
way, how much one sentence entails the other); RSE scores a pair per relation. ``model.similarity`` is
the method's own score, ``model.cosine`` the cosine of the two embeddings.
"""

import sys
from pathlib import Path

from scipy.stats import spearmanr

import structcse

demo = sys.argv[1] if len(sys.argv) > 1 else "demo_out"
rows = [line.split("\t") for line in Path(f"{demo}/world/sts/sts-test.csv").read_text(encoding="utf-8").splitlines()]
gold = [float(r[4]) for r in rows]  # the STS-B layout: score in column 5, the two sentences in 6 and 7
first, second = [r[5] for r in rows], [r[6] for r in rows]

for method in ("gausscse", "rse"):
    model = structcse.load(f"{demo}/runs/{method}/model")
    own, cosine = model.similarity(first, second), model.cosine(first, second)  # numpy arrays, one per pair
    print(f"{method}: similarity = {model.similarity_name}")
    print(f"  pair 1: own {own[0]:.4f}, cosine {cosine[0]:.4f}  ({first[0]} | {second[0]})")
    print(f"  Spearman vs gold on {len(rows)} pairs: own {spearmanr(own, gold)[0]:.4f}, "
          f"cosine {spearmanr(cosine, gold)[0]:.4f}")

# one entailment pair of the world's NLI test split: the premise, a hypothesis it entails
nli = f"{demo}/world/nli"
labels, premises, hypotheses = (Path(f"{nli}/{name}.test").read_text(encoding="utf-8").splitlines()
                                for name in ("labels", "s1", "s2"))
premise, hypothesis = next((p, h) for label, p, h in zip(labels, premises, hypotheses) if label == "entailment")
print(f"\nentailment pair: {premise} => {hypothesis}")

gauss = structcse.load(f"{demo}/runs/gausscse/model")
print(f"gausscse: sim(hypothesis||premise) {gauss.asymmetric_similarity(hypothesis, premise):.4f} (its entailment "
      f"score), sim(premise||hypothesis) {gauss.asymmetric_similarity(premise, hypothesis):.4f}")
mu, var = gauss.gaussian([premise, hypothesis])  # numpy (2, d) each: each sentence's mean and variance
print(f"gausscse: Gaussians {mu.shape}, log-det (broader = more general): {gauss.log_det([premise, hypothesis])}")

rse = structcse.load(f"{demo}/runs/rse/model")
scores = rse.relation_scores(premise, hypothesis)  # {relation: cos(h_premise + r_relation, h_hypothesis)}
print("rse relations: " + ", ".join(f"{name} {value:.4f}" for name, value in scores.items()))
