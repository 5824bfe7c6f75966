"""Read a set ingest wrote, then run each method's own evaluation, as ``python -m eval`` does.

    python examples/read_set_and_evaluate.py demo_out
"""

import sys

import structcse

demo = sys.argv[1] if len(sys.argv) > 1 else "demo_out"

# a set is checked whole before it is read (its job finished, every file it lists is there)
triplets = structcse.read_set(f"{demo}/pairs", "nli_triplets")  # pyarrow.Table
manifest = structcse.read_manifest(f"{demo}/pairs", "nli_triplets")
print(f"nli_triplets: {triplets.num_rows} rows (manifest: {manifest['rows']}), columns {triplets.column_names}")
print(triplets.to_pandas().head(3).to_string(max_colwidth=40))

# each method on its own task (structcse.tasks() lists them all)
evaluations = [
    ("simcse_unsup", "sts", {"data": f"{demo}/world/sts", "split": "test"}),
    ("gausscse", "nli", {"data": f"{demo}/world/nli", "split": "test"}),  # threshold tuned on dev
    ("rse", "relational_sts", {"data": f"{demo}/world/sts", "split": "test"}),
]
for method, task, where in evaluations:
    result = structcse.evaluate(f"{demo}/runs/{method}/model", task, **where)
    figures = {k: round(v, 4) for k, v in result.items() if isinstance(v, float) and k != "seconds"}
    print(f"{method} {task} ({result['split']}): {figures}")
