"""Method registry: name -> :class:`~train.methods.base.Method` subclass.

Every module in this package is imported once (auto-discovery), and each
method registers itself with ``@register("name")``; so a new method is one new
file here plus one YAML in ``configs/``. ``load_method_heads(model_dir)``
rebuilds a trained method's extra parameters saved beside a model.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

METHODS: dict = {}
_HELPERS = {"base", "contrastive", "pair_losses", "tiled"}


def register(name: str):
    def deco(cls):
        if name in METHODS and METHODS[name] is not cls:
            raise ValueError(f"method {name!r} registered twice ({METHODS[name]} and {cls})")
        cls.name = name
        METHODS[name] = cls
        return cls

    return deco


def get_method(name: str):
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r}; known: {sorted(METHODS)}")
    return METHODS[name]


def load_method_heads(model_dir: str | Path, map_location: str = "cpu", info: dict | None = None):
    """The method module saved beside a SentenceTransformer folder (``structcse_method.json``
    + ``structcse_heads.pt``), e.g. EASE's entity table + projection; None if absent.
    ``info``: the method file's contents when the caller has already read (and checked) it."""
    from train.methods.base import HEADS_FILE, METHOD_FILE

    model_dir = Path(model_dir)
    if info is None:
        if not (model_dir / METHOD_FILE).is_file():
            return None
        info = json.loads((model_dir / METHOD_FILE).read_text())
    cls = get_method(info["method"])
    method = cls(
        cls.Options(**info["options"]),
        hidden_size=info["hidden_size"],
        temperature=info["temperature"],
        data_info=info.get("data_info", {}),
    )
    if info.get("heads_file"):
        from train.state_files import load_tensors

        method.load_state_dict(load_tensors(model_dir / HEADS_FILE))
        method.to(map_location)
    return method.eval()


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in _HELPERS and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_discover()
