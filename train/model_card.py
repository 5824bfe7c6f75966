"""The trained model's card: sentence-transformers writes a generic README.md into the model folder
("Base model: Unknown"); this section says what the model is — the base it started from, the method
and its paper (``Method.citation``), the sets it trained on (rows and the sha256 of each set's manifest, so a reader can
tell which build of a set it was), and the dev metric it was selected by, and the code version that trained it (``infra.version``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from infra.storage import is_uri
from setformat.io import manifest_path
from train.methods import get_method



def set_facts(kind: str, folder: Path) -> dict:
    """Rows and manifest sha256 of a local set folder (what is known of a remote one: its path)."""
    facts = {"set": kind, "path": str(folder)}
    manifest = Path(manifest_path(folder))
    if not is_uri(str(folder)) and manifest.is_file():
        raw = manifest.read_bytes()
        facts["manifest_sha256"] = hashlib.sha256(raw).hexdigest()
        try:
            facts["rows"] = json.loads(raw).get("rows")
        except ValueError:
            pass
    return facts


def card_section(cfg, sets: list[dict], selected_by: str, metrics: dict, elastic: dict | None = None) -> str:
    lines = ["", "## Training (structcse)", "",
             f"- **Base model:** `{cfg.model}` (pooling `{cfg.pooling}`, trained at max length {cfg.max_len}, reads whole texts up to the base's limit)",
             f"- **Method:** `{cfg.method}` — {get_method(cfg.method).citation or cfg.method}",
             f"- **Steps:** {metrics.get('step', '?')} at global batch {cfg.batch_size}, lr {cfg.lr:g}, "
             f"temperature {cfg.temperature:g}, seed {cfg.seed}"]
    for s in sets:
        extra = (f", {s['rows']} rows" if s.get("rows") is not None else "") + \
                (f", manifest sha256 `{s['manifest_sha256'][:16]}…`" if s.get("manifest_sha256") else "")
        lines.append(f"- **Set `{s['set']}`:** `{s['path']}`{extra}")
    if not selected_by.startswith("latest") and metrics.get(selected_by) is not None:
        lines.append(f"- **Selected by:** `{selected_by}` = {metrics[selected_by]:.4f} (dev data `{cfg.dev_data}`)")
    else:  # selected_by: "latest: <why>" (train.checkpoints.select)
        lines.append(f"- **Selected by:** the latest checkpoint ({selected_by.partition(': ')[2] or 'no dev data'})")
    if elastic is not None:
        moves = ", ".join(f"{r['from']}→{r['to']} at step {r['step']}" for r in elastic["resizes"]) or "none"
        lines.append(f"- **Elastic:** {elastic['num_workers'][0]} to {elastic['num_workers'][1]} workers, the same "
                     f"rows at every global step at any size; resizes: {moves}")
    from infra.version import code_version

    lines += [f"- **Code:** structcse `{code_version()}`",
              "- **Run:** `train_summary.json` and `tensorboard/` beside this folder", ""]
    return "\n".join(lines)
