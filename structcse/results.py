"""What an end-to-end command (``structcse aspects``, ``structcse dsbats``) leaves beside its models: the table
as ``OUT/NAME.md``, every figure as ``OUT/NAME.json``, and the table on the terminal."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def write_results(out: Path, name: str, markdown: str, result: dict, table: str) -> dict:
    """``OUT/NAME.md`` (``markdown``) and ``OUT/NAME.json`` (``result``, which names the ``.md``), then ``table``
    logged; returns ``result``."""
    result = {**result, "table": str(out / f"{name}.md")}
    (out / f"{name}.md").write_text(markdown)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
    log.info("")
    log.info(table)
    return result
