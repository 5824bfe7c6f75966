"""Encode sentences with a trained model and find each query's nearest neighbours (cosine).

    python examples/encode_and_search.py demo_out

``demo_out`` is the folder ``structcse demo --out demo_out`` wrote: the SimCSE model it trained is
``runs/simcse_unsup/model``, the sentences ingest extracted are the ``sentences`` set of ``sets/``.
"""

import sys

import numpy as np

import structcse

demo = sys.argv[1] if len(sys.argv) > 1 else "demo_out"
model = structcse.load(f"{demo}/runs/simcse_unsup/model")
print(f"loaded {model.path} (method: {model.method_name}, similarity: {model.similarity_name})")

table = structcse.read_set(f"{demo}/sets", "sentences", columns=["sentence"])  # a pyarrow.Table
corpus = list(dict.fromkeys(table["sentence"].to_pylist()))[:1000]  # distinct sentences
vectors = model.encode(corpus, batch_size=64)  # numpy (N, d), float32
vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
print(f"encoded {len(corpus)} sentences -> {vectors.shape[1]}-d vectors")

queries = corpus[:3]
for query, query_vector in zip(queries, model.encode(queries)):
    cosines = vectors @ (query_vector / np.linalg.norm(query_vector))
    print(f"\nquery: {query}")
    for row in np.argsort(-cosines)[1:4]:  # [0] is the query itself
        print(f"  {cosines[row]:.3f}  {corpus[row]}")
