"""What a method is: the set(s) it reads, how a batch is built, its extra heads, its loss.

A method is an ``nn.Module`` subclass of :class:`Method` registered with
``@register("name")`` in its own file under ``train/methods/``; the loop, the
checkpointing, the cross-worker gather and the saving are shared. Adding a
method = one file here + one YAML in ``configs/``.

Life cycle:

* driver (``train.run``), before any worker starts: ``validate_options``,
  ``check_set`` of every set in ``sets`` (only the listed columns),
  ``data_info(cfg, set_paths)`` (small facts such as an entity vocabulary size);
  the Ray dataset is ``read_parquet(set_paths[train_set], columns=sets[train_set])``;
* every worker: ``Method(options, hidden_size=, temperature=, data_info=)``;
  on a fresh start, rank 0 calls ``init_pretrained(set_paths)`` (DDP then
  broadcasts rank 0's parameters); per step ``collate`` (numpy batch ->
  tensors) and ``loss(encoder, batch) -> (loss, metrics)``;
* saving: ``save_heads(model_dir)`` writes the extra parameters
  (``structcse_heads.pt``) and ``structcse_method.json`` beside the
  SentenceTransformer files; ``train.methods.load_method_heads(model_dir)``
  rebuilds the module.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

HEADS_FILE = "structcse_heads.pt"
METHOD_FILE = "structcse_method.json"


class Method(nn.Module):
    name: ClassVar[str] = ""
    train_set: ClassVar[str] = ""
    sets: ClassVar[dict[str, list[str]]] = {}

    @dataclasses.dataclass
    class Options:
        pass

    def __init__(self, options: Any, *, hidden_size: int, temperature: float, data_info: dict | None = None):
        super().__init__()
        self.options = options
        self.hidden_size = hidden_size
        self.temperature = temperature
        self.data_info = dict(data_info or {})

    # ---------------------------------------------------------- driver side
    @classmethod
    def validate_options(cls, options: Any, cfg: Any) -> None:
        """Raise ``ConfigError`` for bad option values."""

    @classmethod
    def data_info(cls, cfg: Any, set_paths: dict[str, Path]) -> dict:
        """Small JSON-able facts the workers need about the data (computed once on the driver)."""
        return {}

    # ---------------------------------------------------------- worker side
    def init_pretrained(self, set_paths: dict[str, str]) -> None:
        """Initialise heads from external files on a fresh start (rank 0 only)."""

    def collate(self, batch: dict[str, np.ndarray], encoder) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def loss(self, encoder, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError

    # ---------------------------------------------------------- saving
    def describe(self) -> dict:
        return {
            "method": self.name,
            "options": dataclasses.asdict(self.options),
            "hidden_size": self.hidden_size,
            "temperature": self.temperature,
            "data_info": self.data_info,
        }

    def save_heads(self, model_dir: str | Path) -> None:
        model_dir = Path(model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        info = self.describe()
        if any(True for _ in self.parameters()):
            torch.save({k: v.detach().cpu() for k, v in self.state_dict().items()}, model_dir / HEADS_FILE)
            info["heads_file"] = HEADS_FILE
        (model_dir / METHOD_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))


def set_files(path: str | Path) -> list[str]:
    """The parquet files of a set folder (its manifest.json and other files are skipped)."""
    path = Path(path)
    return [str(f) for f in sorted(path.glob("*.parquet"))] if path.is_dir() else [str(path)]


def read_set(path: str | Path, columns: list[str]):
    """A pyarrow Table with ``columns`` of the set at ``path``."""
    import pyarrow.dataset as pads

    return pads.dataset(set_files(path), format="parquet").to_table(columns=columns)


def tokenize(encoder, texts: np.ndarray | list[str]) -> dict[str, torch.Tensor]:
    """Tokenize a column of strings with the encoder's tokenizer (padding to the longest, truncation at max_len)."""
    return encoder.tokenize([str(t) for t in texts])


def double(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """[x; x]: each sentence twice in ONE forward, so the two copies get independent dropout masks."""
    return {k: torch.cat([v, v], dim=0) for k, v in inputs.items()}
