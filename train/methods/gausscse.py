"""GaussCSE: sentences as diagonal Gaussians, asymmetric similarity by KL (Yoda et al., 2023, arXiv 2305.12990).

Reads: the ``nli_triplets`` set (``premise``, ``entailment``, ``contradiction``).
Batch: B triplets, encoded column by column (the contradictions only when the
variant has ``con``). ``pooling: cls_raw``: the [CLS] vector v, which the paper feeds to
"two distinct linear layers".
Heads (:class:`~train.methods.pair_losses.GaussianHead`, ``self.head``):
μ = W_μ v (``mean_mode: tanh`` gives the code's tanh(W_μ v)) and σ² = exp(ℓ),
ℓ = W_v v bounded to [min_logvar, max_logvar] by a tanh (``logvar_bound``;
``none`` is the reference code's unbounded exp, which overflows bf16).
Similarity: sim(a‖b) = 1/(1+KL(N_a‖N_b)) (``similarity: kl_sum``, the paper);
``per_dim`` is the reference code's mean_d 1/(1+KL_d).
Loss (:func:`~train.methods.pair_losses.gausscse_loss`), τ = 0.05, label i on
the row of premise s_i: positives sim(s_j⁺‖s_i), contradictions sim(s_j⁻‖s_i)
(``con``), reversed sim(s_j‖s_i⁺) (``rev``). ``variant``: ent | ent+con |
ent+rev | ent+con+rev (default, the reference code's ``pos+rev+neg``).
μ and σ² of every row are all-gathered with gradient across workers.

Saved model: ``SentenceTransformer(path).encode`` gives μ (a Dense module after the
pooling; its similarity function is cosine), the embedding whose cosine the STS table
reports beside the KL score; σ needs ``structcse.load``.
After training (``train.saved_models.load``): ``gaussian(texts)`` gives μ/σ²,
``asymmetric_similarity(a, b)`` = sim(a‖b); for NLI the entailment score is
sim(hypothesis‖premise); the premise gets the broader Gaussian.

Siblings: ``simcse_sup.py`` (same triplets, cosine of points instead of KL).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from train.distributed import gather_with_grad, local_rows
from train.methods import register
from train.methods.base import Method
from train.methods.pair_losses import (
    SIMILARITY_FORMS,
    Gaussian,
    GaussianHead,
    asymmetric_similarity,
    gausscse_loss,
    parse_gausscse_variant,
    symmetric_similarity,
)


@register("gausscse")
class GaussCSE(Method):
    citation = "GaussCSE (Yoda et al., 2023)"
    pair_score_name = "gausscse_symmetric_kl"
    eval_tasks = (("nli", "nli", {"auprc": "NLI AUPRC", "accuracy": "NLI acc"}),
                  ("direction", "nli", {"sim_acc": "direction (sim)", "det_acc": "direction (log-det)"}))
    dev_metric = "nli_auprc"
    train_set = "nli_triplets"
    sets = {"nli_triplets": ["premise", "entailment", "contradiction"]}
    text_columns = ("premise", "entailment", "contradiction")

    @dataclasses.dataclass
    class Options:
        variant: str = "ent+con+rev"  # ent | ent+con | ent+rev | ent+con+rev
        similarity: str = "kl_sum"  # kl_sum (paper) | per_dim (reference code) | kl_mean
        mean_mode: str = "linear"  # linear (paper) | tanh (reference code)
        logvar_bound: str = "tanh"  # tanh | clamp | none (reference code: unbounded)
        min_logvar: float = -10.0
        max_logvar: float = 10.0
        head_lr: Optional[float] = None  # learning rate of the fresh μ/σ heads (None: the encoder's, as the paper)

    @classmethod
    def validate_options(cls, options, cfg):
        from train.errors import ConfigError

        try:
            parse_gausscse_variant(options.variant)
        except ValueError as e:
            raise ConfigError(f"gausscse.variant: {e}") from None
        if options.similarity not in SIMILARITY_FORMS:
            raise ConfigError(f"gausscse.similarity {options.similarity!r} is not one of {list(SIMILARITY_FORMS)}")
        if options.mean_mode not in ("linear", "tanh"):
            raise ConfigError(f"gausscse.mean_mode {options.mean_mode!r} is not one of linear, tanh")
        if options.logvar_bound not in ("tanh", "clamp", "none"):
            raise ConfigError(f"gausscse.logvar_bound {options.logvar_bound!r} is not one of tanh, clamp, none")
        if not options.min_logvar < options.max_logvar:
            raise ConfigError("gausscse.min_logvar must be < gausscse.max_logvar")
        if options.head_lr is not None and not options.head_lr > 0:
            raise ConfigError(f"gausscse.head_lr must be > 0 or null, got {options.head_lr}")

    @classmethod
    def tokenized_columns(cls, options):
        use_con, _ = parse_gausscse_variant(options.variant)
        return cls.text_columns if use_con else cls.text_columns[:2]

    def __init__(self, options, *, hidden_size, temperature, data_info=None):
        super().__init__(options, hidden_size=hidden_size, temperature=temperature, data_info=data_info)
        self.head = GaussianHead(
            hidden_size,
            options.mean_mode,
            bound=options.logvar_bound,
            min_logvar=options.min_logvar,
            max_logvar=options.max_logvar,
        )

    def optimizer_groups(self, lr):
        if self.options.head_lr is None:
            return []
        return [{"params": list(self.head.parameters()), "lr": self.options.head_lr, "weight_decay": 0.0}]

    def _gathered(self, pooled: torch.Tensor) -> Gaussian:
        g = self.head(pooled)
        return Gaussian(gather_with_grad(g.mu), gather_with_grad(g.var))

    def loss_from_embeddings(self, emb, batch):
        rows = local_rows(emb["premise"].shape[0])
        prem, ent = self._gathered(emb["premise"]), self._gathered(emb["entailment"])
        con = self._gathered(emb["contradiction"]) if "contradiction" in emb else None
        loss = gausscse_loss(
            prem,
            ent,
            con,
            temperature=self.temperature,
            variant=self.options.variant,
            form=self.options.similarity,
            rows=rows,
            tile=self.loss_tile,
        )
        with torch.no_grad():  # how often the premise already has the broader Gaussian (direction by log-det)
            det_acc = (prem.log_det()[rows] > ent.log_det()[rows]).float().mean()
        return loss, {"loss_gausscse": loss.detach(), "premise_broader": det_acc}

    # ------------------------------------------------------------ after training
    def gaussian(self, pooled: torch.Tensor) -> Gaussian:
        """μ and σ² (float32) of inference embeddings (the SentenceTransformer's output)."""
        return self.head(pooled.to(self.head.mean.weight.dtype))

    def sentence_embedding(self, pooled: torch.Tensor) -> torch.Tensor:
        """μ: the point a Gaussian sentence is at."""
        return self.gaussian(pooled).mu

    def embedding_modules(self):
        """μ = W_μ v + b (tanh of it for ``mean_mode: tanh``) as a sentence-transformers Dense module."""
        from sentence_transformers.sentence_transformer.modules import Dense

        mean = self.head.mean
        return [Dense(mean.in_features, mean.out_features,
                      activation_function=torch.nn.Tanh() if self.options.mean_mode == "tanh" else torch.nn.Identity(),
                      init_weight=mean.weight.detach().float().cpu().clone(),
                      init_bias=mean.bias.detach().float().cpu().clone())]

    def asymmetric_similarity(self, a: Gaussian, b: Gaussian) -> torch.Tensor:
        """sim(a‖b) with this model's similarity form."""
        return asymmetric_similarity(a, b, self.options.similarity)

    def pair_score(self, h_a: torch.Tensor, h_b: torch.Tensor) -> torch.Tensor:
        """1/(1+(KL(a‖b)+KL(b‖a))/2) of the two Gaussians (the reference code's STS score)."""
        return symmetric_similarity(self.gaussian(h_a), self.gaussian(h_b), self.options.similarity)
