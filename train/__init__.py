"""Training: encoder, one module per method (heads + loss), the Ray Train loop.

Public API::

    from train import TrainConfig, load_config, ConfigError
    from train.run import build_trainer, run        # the driver: plan -> Ray -> TorchTrainer -> finish
    from train.plan import make_plan, RunPlan       # the preflight, on its own
    from train.finish import TrainOutcome
    from train.saved_models import load             # a saved model folder -> score.model.TrainedModel
    from train.encoder import Encoder
    from train.loop import train_loop_per_worker, LoopInputs
    from train.methods import METHODS, load_method_heads

(``train.run`` is the module; import the function from it.) ``python -m train
--config configs/ease.yaml`` runs the same thing from a shell.
"""

from __future__ import annotations

import infra.logs  # noqa: F401  (its import gives the project's loggers their handler: infra.logs.project_lines)
from train.config import ConfigError, TrainConfig, load_config

__all__ = ["ConfigError", "TrainConfig", "load_config"]
