"""Infrastructure every stage shares: keys and tokens kept out of what is written (``infra.secrets``),
starting a local Ray without walking into a dead cluster (``infra.ray_local``).

It imports nothing of the stages (ingest, score, train, eval, tune): they all import it.
"""

from infra import logs as _logs  # noqa: F401  (its import gives the project's loggers their handler)
