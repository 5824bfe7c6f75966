"""Scoring: what a figure means, once — below train, so that checkpoint selection, Tune and ``python -m eval``
report the same number for the same model and file.

    ingest  <-  score  <-  train  <-  eval  <-  tune

* ``score.sts_data``, ``score.sts_sets``, ``score.nli_data``, ``score.aspects``, ``score.srsd``: one reader
  per evaluation format (STS-B; STS12–16 and SICK relatedness; SentEval NLI and SICK entailment;
  ``aspect_docs`` and ``srsd`` sets), one rule for a bad row: skipped, counted and reported;
* ``score.metrics``: Spearman/Pearson (one rule for constant predictions), thresholded accuracy, AP and
  AUPRC (sklearn), entailment direction, ranking metrics; ``score.aspects`` holds the retrieval metrics;
* ``score.model``: :class:`~score.model.TrainedModel`, the inference API over an encoder and its method's
  heads, asked for by capability (never by method name); ``train.saved_models.load`` builds one from a
  model folder;
* ``score.dev_metrics``: the dev-metric registry (``sts_spearman``, ``relational_spearman``,
  ``nli_auprc``, ``aspect_p10``, ``srsd``).

Nothing here imports train, eval or tune.
"""

import infra.logs  # noqa: F401  (its import gives the project's loggers their handler: infra.logs.project_lines)
