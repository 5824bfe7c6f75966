"""The shipped training configs (``configs/*.yaml``), loaded with overrides.

``configs/`` sits beside the packages: the repository's folder in a checkout (or an editable install), the
same folder installed as package data by a wheel (pyproject.toml). Without it, an error naming the folder."""

from __future__ import annotations

from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def training_config(method: str, overrides: list[str]):
    """``configs/<method>.yaml`` with ``key=value`` overrides; a ConfigError when there is none."""
    from train.config import ConfigError, load_config

    path = CONFIGS / f"{method}.yaml"
    if not CONFIGS.is_dir():
        raise ConfigError(f"structcse's training configs are missing: {CONFIGS} is not a folder (a checkout has "
                          "configs/ beside structcse/; a wheel installs it there)")
    if not path.is_file():
        raise ConfigError(f"no training config for method {method!r}: {path} does not exist")
    return load_config(path, overrides)
