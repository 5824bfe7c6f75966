"""The shipped training configs (``configs/*.yaml``), loaded with overrides."""

from __future__ import annotations

from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def training_config(method: str, overrides: list[str]):
    """``configs/<method>.yaml`` (or the method's defaults when there is none) with ``key=value`` overrides."""
    from train.config import TrainConfig, load_config

    path = CONFIGS / f"{method}.yaml"
    if path.exists():
        return load_config(path, overrides)
    return TrainConfig.from_dict({"method": method}).with_overrides(overrides)
