"""MkDocs hook (``mkdocs.yml``: ``hooks``): the build stops when a reference page made from the code
(``docs/gen_reference.py``: the config keys, the environment variables, the evaluation tasks' defaults)
no longer matches the code, naming the page and the command that rewrites it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError


def _generator():
    path = Path(__file__).with_name("gen_reference.py")
    spec = importlib.util.spec_from_file_location("structcse_docs_gen_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def on_pre_build(config, **kwargs) -> None:
    gen = _generator()
    try:
        stale = gen.stale()
    except gen.Undocumented as e:
        raise PluginError(f"docs/gen_reference.py: {e}") from None
    if stale:
        raise PluginError(f"{', '.join(map(str, stale))}: no longer match the code; "
                          "run `python docs/gen_reference.py`")
