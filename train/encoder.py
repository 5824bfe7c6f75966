"""The sentence encoder: any Hugging Face model + a pooling, saved as a SentenceTransformer.

Poolings (SimCSE's names in brackets):

* ``cls``     [cls]: CLS vector -> Linear(d, d) + tanh, at train AND inference time;
* ``cls_mlp`` [cls + mlp_only_train]: the MLP is applied while training only;
  inference uses the raw CLS vector (SimCSE-unsup and EASE-monolingual recipe);
* ``cls_raw`` [cls_before_pooler]: the CLS vector, no MLP (heads of their own go on it: GaussCSE);
* ``mean``    [avg]: attention-masked mean of the last layer.

The HF pooler (BERT's NSP head) is removed: SimCSE does not use it, and an
unused parameter would break DDP.

For BERT encoders the forward runs the per-token layers on the real tokens
only (``train.unpadded``; ``unpad=False`` takes the stock forward).

``forward`` gives the train-time embedding (MLP for cls and cls_mlp), ``encode``
the inference embedding; ``save_sentence_transformer(path)`` writes a folder
that ``SentenceTransformer(path)`` loads and that gives the same embeddings as
``encode``: Transformer (max_seq_length = max_len) + Pooling(cls|mean) + for
``cls`` a Dense(d, d, tanh) module holding the trained MLP.

A sentence-transformers base whose module stack ends in ``Normalize`` (all-MiniLM-L6-v2 and most
of its siblings) keeps it: the encoder normalizes its embeddings at train and inference time, and
the saved folder ends in ``Normalize`` too, so the fine-tuned model gives unit vectors like its base
(cosine losses are unchanged by it; offsets and heads see what the saved model gives).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from infra.cache import as_local
from train.errors import ConfigError
from train.unpadded import one_word_embedding_backward, supports_unpadding, unpadded_forward_columns

STOCK_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # what a token dict hands the stock forward
# BERT/RoBERTa/MPNet/... and DistilBERT names of the encoder's dropout probabilities
DROPOUT_ATTRS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout")


class Encoder(nn.Module):
    def __init__(self, model: str, pooling: str = "cls_mlp", max_len: int = 32, dropout: float | None = None,
                 unpad: bool = True):
        super().__init__()
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if pooling not in ("cls", "cls_mlp", "cls_raw", "mean"):
            raise ValueError(f"pooling {pooling!r} is not one of cls, cls_mlp, cls_raw, mean")
        self.name_or_path = model
        model = as_local(model)  # a model in a bucket: each node's local copy (made once per content)
        config = AutoConfig.from_pretrained(model)
        if dropout is not None:
            for attr in DROPOUT_ATTRS:
                if isinstance(getattr(config, attr, None), float):
                    setattr(config, attr, dropout)
        self.pooling = pooling
        self.max_len = max_len
        self.model = AutoModel.from_pretrained(model, config=config)
        self.model.train()  # from_pretrained returns eval mode (dropout off); a new module trains, as nn.Module
        if getattr(self.model, "pooler", None) is not None:
            self.model.pooler = None
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        # training cuts at max_len; reading (encode, the saved folder, every evaluation) goes up to the base's own limit
        self.read_len = max(reading_limit(model, config, self.tokenizer), max_len)
        self.unpad = unpad and supports_unpadding(self.model)  # per-token layers on real tokens only
        self.compile_layers = False  # the unpadded path's per-token layers through torch.compile (train.unpadded)
        self._warned_keys = False
        d = self.hidden_size
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.Tanh()) if pooling in ("cls", "cls_mlp") else None
        self.normalize = base_normalizes(model)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def tokenize(self, texts: list[str], max_length: int | None = None) -> dict[str, torch.Tensor]:
        """Training's tokens: cut at ``max_len`` (``max_length``: another limit, as ``encode`` reads at ``read_len``)."""
        return dict(self.tokenizer(texts, padding=True, truncation=True, max_length=max_length or self.max_len,
                                   return_tensors="pt"))

    def forward(self, input_ids, attention_mask, token_type_ids=None, row_keys=None, *,
                inference: bool | None = None) -> torch.Tensor:
        """Sentence embeddings (B, d). ``inference`` defaults to ``not self.training``; ``row_keys``: keyed
        dropout masks (``train.dropout_keys``)."""
        column = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids,
                  "row_keys": row_keys}
        return self.forward_columns([column], inference=inference)[0]

    def forward_columns(self, columns: list[dict], *, inference: bool | None = None) -> list[torch.Tensor]:
        """``[self(**column) for column in columns]``; an unpadded encoder runs them as one
        token matrix (``unpadded_forward_columns``), each padded to its own longest row.

        Weights in bf16 (``train.precision.Bf16Weights``) run with autocast off: autocast would
        cast LayerNorm's and softmax's bf16 inputs up to float32 and back."""
        half = self.model.get_input_embeddings().weight.dtype in (torch.bfloat16, torch.float16)
        with torch.autocast(self.device.type, enabled=False) if half else contextlib.nullcontext():
            if self.unpad:
                hidden = unpadded_forward_columns(self.model, columns, compiled=self.compile_layers)
            else:
                if self.training and not self._warned_keys and any(c.get("row_keys") is not None for c in columns):
                    self._warned_keys = True
                    warnings.warn(f"{self.name_or_path}: dropout masks are drawn per worker, not keyed by row: keyed "
                                  "masks (an elastic run's) need a BERT encoder's unpadded path", stacklevel=2)
                hidden = [self.model(**{k: v for k, v in column.items() if v is not None and k in STOCK_INPUTS})
                          .last_hidden_state for column in columns]
            return [self.pool(h, column["attention_mask"], inference) for h, column in zip(hidden, columns)]

    def one_word_embedding_backward(self):
        """A context in which backward passes through the word embeddings are collected
        and applied to their gradient once, on leaving (`train.unpadded.one_word_embedding_backward`;
        for GradCache's per-chunk backwards). A no-op for the stock forward."""
        return one_word_embedding_backward(self.model) if self.unpad else contextlib.nullcontext()

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor, inference: bool | None = None) -> torch.Tensor:
        """(B, L, d) last hidden states -> (B, d) sentence embeddings."""
        if inference is None:
            inference = not self.training
        if self.pooling == "mean":
            m = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        elif self.pooling == "cls" or (self.pooling == "cls_mlp" and not inference):
            pooled = self.mlp(hidden[:, 0])
        else:
            pooled = hidden[:, 0]
        return nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled

    @torch.no_grad()
    def encode(self, texts: list[str], batch_size: int = 64) -> torch.Tensor:
        """Inference embeddings (eval mode, inference pooling) on CPU as float32, texts read up to ``read_len``."""
        was_training = self.training
        self.eval()
        try:
            out = []
            for i in range(0, len(texts), batch_size):
                batch = self.tokenize(list(texts[i : i + batch_size]), max_length=self.read_len)
                inputs = {k: v.to(self.device) for k, v in batch.items()}
                out.append(self(**inputs, inference=True).float().cpu())
            return torch.cat(out) if out else torch.empty(0, self.hidden_size)
        finally:
            self.train(was_training)

    def save_sentence_transformer(self, path: str | Path, embedding_modules=()) -> Path:
        """Write a SentenceTransformer folder that reproduces ``encode``: it reads up to ``read_len`` tokens (the
        base's own limit), not the ``max_len`` training cut at. ``embedding_modules`` (a method's
        ``embedding_modules()``) follow, so the folder's ``encode`` is the method's sentence embedding; its
        similarity function is cosine."""
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

        path = Path(path)
        d = self.hidden_size
        with tempfile.TemporaryDirectory() as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            modules = [
                Transformer(tmp, max_seq_length=self.read_len),
                Pooling(d, "mean" if self.pooling == "mean" else "cls"),
            ]
            if self.pooling == "cls":
                lin = self.mlp[0]
                modules.append(
                    Dense(
                        d,
                        d,
                        activation_function=nn.Tanh(),
                        init_weight=lin.weight.detach().float().cpu().clone(),
                        init_bias=lin.bias.detach().float().cpu().clone(),
                    )
                )
            if self.normalize:
                modules.append(Normalize())
            model = SentenceTransformer(modules=[*modules, *embedding_modules], device="cpu")
            model.similarity_fn_name = "cosine"
            model.save(str(path))
        return path


ST_POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls_raw"}


def _one_line(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())


def _st_file(model: str, name: str) -> Path | None:
    """``name`` of a sentence-transformers folder, or of a hub repo (local cache or fetched); None only when
    the folder or repo is known not to have it. A lookup that cannot tell (offline and not cached, a network
    error, no such repo) is a ConfigError naming the model: a base's Pooling or Normalize is never dropped
    because the hub could not be asked."""
    path = Path(as_local(model)).expanduser()
    if path.is_dir():
        return path / name if (path / name).is_file() else None
    from huggingface_hub import _CACHED_NO_EXIST, hf_hub_download, try_to_load_from_cache
    from huggingface_hub.utils import EntryNotFoundError, LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(model, name))
    except LocalEntryNotFoundError as e:  # offline or unreachable, and not in the cache
        if try_to_load_from_cache(model, name) is _CACHED_NO_EXIST:  # an earlier lookup found the repo without it
            return None
        cause = e
    except EntryNotFoundError:  # the repo has no such file
        return None
    except Exception as e:
        cause = e
    raise ConfigError(f"model {model!r}: cannot tell whether it is a sentence-transformers model: {name} could not "
                      f"be looked up ({_one_line(cause)}); pass a local folder, or retry with the hub reachable")


def _st_modules(model: str) -> list[dict] | None:
    """The modules of a sentence-transformers ``model`` (its modules.json, each module a dict with a ``type``);
    None for a plain transformers model. A modules.json that is not such a list is a ConfigError."""
    modules_file = _st_file(model, "modules.json")
    if modules_file is None:
        return None
    try:
        modules = json.loads(modules_file.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"model {model!r}: {modules_file} is not a sentence-transformers modules list "
                          f"({_one_line(e)})") from e
    if not isinstance(modules, list):
        raise ConfigError(f"model {model!r}: {modules_file} is not a sentence-transformers modules list "
                          f"(a {type(modules).__name__}, not a list)")
    for i, m in enumerate(modules):
        if not (isinstance(m, dict) and isinstance(m.get("type"), str) and m["type"]
                and isinstance(m.get("path", ""), str)):
            raise ConfigError(f"model {model!r}: {modules_file}: module {i} ({json.dumps(m)[:200]}) is not an "
                              "object with a type (and a path)")
    return modules


def _module_class(module: dict) -> str:
    return module["type"].rsplit(".", 1)[-1]


def base_pooling(model: str) -> str | None:
    """The pooling of a sentence-transformers ``model``'s own Pooling module as this encoder names it
    (mean tokens -> ``mean``, CLS token -> ``cls_raw``); None for a plain transformers model or a mode
    the encoder does not have (max, weighted mean, last token). A Pooling module whose config is missing
    or unreadable is a ConfigError naming the model."""
    modules = _st_modules(model)
    pooling = next((m for m in modules or [] if _module_class(m) == "Pooling"), None)
    if pooling is None:
        return None
    name = f"{pooling.get('path') or '(no path)'}/config.json"
    config_file = _st_file(model, name) if pooling.get("path") else None
    if config_file is None:
        raise ConfigError(f"model {model!r}: its modules.json names a Pooling module, but its Pooling config "
                          f"{name} is missing")
    try:
        modes = json.loads(config_file.read_text())
        if not isinstance(modes, dict):
            raise ValueError(f"a {type(modes).__name__}, not an object")
    except (OSError, ValueError) as e:
        raise ConfigError(f"model {model!r}: {config_file} is not a Pooling config ({_one_line(e)})") from e
    on = [ST_POOLING_MODES.get(k) for k, v in modes.items() if k.startswith("pooling_mode_") and v is True]
    return on[0] if len(on) == 1 else None


# models whose position ids start after the padding index (max_position_embeddings counts pad + 1 more)
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text", "xmod")


def reading_limit(model: str, config, tokenizer) -> int:
    """How many tokens the base ``model`` reads: a sentence-transformers base's ``max_seq_length``; else the
    tokenizer's ``model_max_length`` when it states one, within the position embeddings (BERT: 512)."""
    st_config = _st_file(model, "sentence_bert_config.json") if _st_modules(model) is not None else None
    if st_config is not None:
        try:
            value = json.loads(st_config.read_text()).get("max_seq_length")
        except (OSError, ValueError, AttributeError) as e:
            raise ConfigError(f"model {model!r}: {st_config} is not a sentence-transformers config ({_one_line(e)})")
        if isinstance(value, int) and value > 0:
            return value
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and getattr(config, "model_type", "") in OFFSET_POSITIONS:
        positions -= (getattr(config, "pad_token_id", None) or 1) + 1
    stated = getattr(tokenizer, "model_max_length", None)
    stated = stated if isinstance(stated, int) and 0 < stated < 1_000_000 else None
    limits = [v for v in (stated, positions) if isinstance(v, int) and v > 0]
    return min(limits) if limits else 512


def base_normalizes(model: str) -> bool:
    """Whether ``model`` is a sentence-transformers folder (or hub repo) whose modules include
    ``Normalize``. A hub name is looked up in the local cache or fetched (``modules.json`` only); a
    plain transformers model is False, a lookup that cannot tell (offline, not cached) a ConfigError."""
    return any(_module_class(m) == "Normalize" for m in _st_modules(model) or [])
