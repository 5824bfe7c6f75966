"""The training configuration: one dataclass, loaded from YAML plus ``key=value`` overrides.

A config file has the top-level fields of :class:`TrainConfig` and, for each
method, an optional section named after it whose keys are that method's
``Options`` (declared in the method's own file, ``train/methods/<name>.py``)::

    method: ease
    model: bert-base-uncased
    lr: 3.0e-5
    ease:
      ease_loss_ratio: 0.01
      entity_temperature: 0.05

Overrides use the same names: ``lr=1e-5`` or ``ease.hard_negative_weight=0``.
An unknown key (top level or inside a section) or a value of the wrong type is
a :class:`ConfigError` that names the key and the file and lists the valid keys.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.storage import is_uri, local_path, read_text
from train.errors import ConfigError

RUN_NAME = re.compile(r"(?!\.\.?$)[A-Za-z0-9._-]{1,128}")


def model_short_name(model: str) -> str:
    """A model's name as a run name's part: the last part of a hub name or path (``sentence-transformers/all-MiniLM-L6-v2``:
    ``all-MiniLM-L6-v2``; a train run's ``runs/NAME/model``: ``NAME``), other characters than letters, digits,
    ``.``, ``_`` and ``-`` as ``-``."""
    parts = [p for p in re.split(r"[/\\]+", str(model or "").split("://", 1)[-1]) if p not in ("", ".", "..")]
    name = parts[-1] if parts else "model"
    if name == "model" and len(parts) > 1:  # a train run's final model: the run is the better name
        name = parts[-2]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:64] or "model"


POOLINGS = ("cls", "cls_mlp", "cls_raw", "mean")
MIXED_PRECISION = ("auto", "none", "bf16", "bf16_weights", "fp16")
FEEDS = ("auto", "memory", "stream")


def _invalid(message: str) -> ConfigError:
    return ConfigError(f"invalid config: {message}")


@dataclass
class TrainConfig:
    """Every knob of a training run. Defaults are SimCSE-unsup BERT-base's (Gao et al. 2021).

    Per-method options live in ``method_options[<method name>]`` and are also
    reachable as attributes: ``cfg.ease.hard_negative_weight``.
    """

    # what to train
    method: str = "simcse_unsup"
    model: str = "bert-base-uncased"  # any Hugging Face path or name
    pooling: str = "cls_mlp"  # cls (CLS+MLP, kept) | cls_mlp (MLP at train time only) | cls_raw (no MLP) | mean
    # a sentence-transformers base keeps its own Pooling (mean -> mean, CLS -> cls_raw) over ``pooling``;
    # false, or ``--set pooling=...``, trains with ``pooling`` (the method's paper pooling) whatever the base
    base_pooling: bool = True
    data: str = ""  # ingest output dir holding set folders, or one set folder
    max_len: int = 32
    dropout: float | None = 0.1  # encoder dropout (the SimCSE-unsup noise); None keeps the model's
    # optimisation
    epochs: int = 1
    batch_size: int = 64  # GLOBAL batch, split evenly across workers
    lr: float = 3e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0
    max_grad_norm: float = 1.0  # HF Trainer's default, which SimCSE/EASE ran with; 0 disables
    temperature: float = 0.05
    seed: int = 42
    max_steps: int | None = None  # cap on optimizer steps (across epochs)
    # 0 = no shuffle (the set's order); else each epoch a seeded permutation of the whole set (train.feeds); a
    # streamed set is then reshuffled each epoch in a local buffer of this many rows
    shuffle_buffer: int = 10_000
    # where the batches come from (train.feeds): memory (each worker holds the training set's columns; the rows of
    # global step s are train.global_order's at any number of workers) | stream (Ray Data, for sets too big to
    # hold) | auto (memory up to train.feeds.MEMORY_FEED_MAX_BYTES of parquet, stream beyond, or with
    # pretokenize / length_bucketing, which work on the stream)
    feed: str = "auto"
    # hardware
    # Ray Train workers; 0 = local mode (runs in the driver); [min, max]: elastic (train.global_order): it starts
    # with what the cluster has between min and max, goes on with fewer when a node is lost, grows when
    # capacity returns, and trains on the same rows at every global step whatever the number of workers
    num_workers: int | list[int] = 1
    resize_check_s: float = 60.0  # elastic: how often Ray Train looks for capacity to grow into
    # Ray Train's wait for a worker group to start (None: Ray's 60 s; 30 s for an elastic run, which after a lost
    # node waits this long for the lost workers, per try, before it restarts on the ones left)
    worker_start_timeout_s: float | None = None
    log_sample_ids: bool = False  # elastic: every worker writes the ids of the rows it trained on (sample_ids/)
    use_gpu: bool = False
    cpus_per_worker: float | None = None  # ScalingConfig resources_per_worker CPU (None: Ray's 1)
    # auto (bf16_weights on a GPU with bf16, none elsewhere: train.precision.resolve) | none | bf16 (autocast) |
    # bf16_weights (the encoder in bf16, cast from fp32 master weights once per step: train.precision) | fp16 (GPU)
    mixed_precision: str = "auto"
    # the weights' and the step's dtype: float64 for exactness checks (bench/elastic.py: a resized run against a
    # fixed-size one); mixed_precision applies to float32
    dtype: str = "float32"
    # speed / memory
    chunk_size: int | None = None  # GradCache: rows per encoder chunk on each worker (None: no caching)
    # the loss's log-sum-exp in tiles of loss_tile anchors x loss_tile candidates (train.methods.tiled): memory
    # O((B + N)·d + tile²) instead of the (B x N) logits; blocks with <= loss_tile² entries stay dense; 0 = dense;
    # None: by device (train.methods.tiled.default_loss_tile: 2,048 on CPU, 8,192 on a GPU)
    loss_tile: int | None = None
    unpad: bool = True  # BERT encoders: Linear/LayerNorm/GELU on real tokens only (train.unpadded); same outputs
    compile: bool = False  # torch.compile the encoder's stock forward (dynamic shapes; turns unpad off)
    # torch.compile the unpadded path's per-token layers (fused bias, GELU, dropout, LayerNorm; train.unpadded)
    compile_layers: bool = False
    pretokenize: bool = False  # tokenize in Ray Data tasks (padded to max_len, cut per batch) instead of in the step
    length_bucketing: int = 0  # regroup every N batches by length (less padding; changes in-batch negatives); 0 = off
    # run bookkeeping
    storage_path: str = "runs"
    run_name: str | None = None  # "{model}": the base model's short name; default "{method}-{model}"; same name + storage = resume
    checkpoint_every_steps: int = 125  # SimCSE/EASE checked STS-B dev every 125 steps; 0 = epoch ends only
    keep_checkpoints: int = 2
    checkpoint_metric: str | None = None  # default: the dev metric's key (dev_spearman, dev_auprc, ...) with dev_data
    max_failures: int = 0  # Ray Train restarts from the last checkpoint after a worker is lost; -1: no limit
    log_every_steps: int = 50  # rank-0 progress line between reports; 0 = reports only
    # model selection (score.dev_metrics): scored at every checkpoint, in the loop or by Tune's evaluation pool
    # dev_data: what the dev metric reads: a folder with sts-dev.csv or the Hub name `mteb/stsbenchmark-sts`
    # (STS); GaussCSE: a SentEval NLI folder or `stanfordnlp/snli`; AspectCSE: an aspect_docs set folder;
    # DSBATS: an srsd set folder; readable by every node on a cluster
    dev_data: str | None = None
    # dev_metric: default: the method's (sts_spearman, relational_spearman, nli_auprc, aspect_p10, srsd)
    dev_metric: str | None = None
    validation_timeout_s: float = 600.0  # bound on one asynchronous dev score (Tune's evaluation pool)
    # method sections: {method name: Options dataclass}
    method_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from train.methods import METHODS

        opts = {}
        for name, cls in METHODS.items():
            given = self.method_options.get(name)
            if given is None:
                opts[name] = cls.Options()
            elif dataclasses.is_dataclass(given):
                opts[name] = given
            else:
                opts[name] = _build_dataclass(cls.Options, dict(given), f"section {name!r}", "<code>")
        unknown = set(self.method_options) - set(METHODS)
        if unknown:
            raise ConfigError(f"unknown method section(s) {sorted(unknown)}; methods: {sorted(METHODS)}")
        self.method_options = opts

    def __getattr__(self, name: str) -> Any:  # cfg.ease -> EASE options
        opts = self.__dict__.get("method_options")
        if opts and name in opts:
            return opts[name]
        raise AttributeError(f"TrainConfig has no field or method section {name!r}")

    @property
    def elastic(self) -> bool:
        """``num_workers: [min, max]``: an elastic run (``train.global_order``)."""
        return isinstance(self.num_workers, list)

    @property
    def min_workers(self) -> int:
        return self.num_workers[0] if self.elastic else self.num_workers

    @property
    def max_workers(self) -> int:
        return self.num_workers[-1] if self.elastic else self.num_workers

    def _validate_checkpoint_metric(self, bad) -> None:
        """``checkpoint_metric`` must be the key the run's dev metric reports (``dev_spearman``, ...): any other
        name is in no checkpoint's metrics, so Ray Train would score every checkpoint -inf and the latest would
        win while the summary said otherwise. Refused here, before Ray starts."""
        name = self.checkpoint_metric
        if name is None:
            return
        from score.dev_metrics import DEV_METRICS

        metric = metric_for(self)
        if self.dev_data is None:
            raise bad(f"checkpoint_metric {name!r} needs dev_data (without it no checkpoint is scored and the "
                      f"latest is kept): set dev_data to {metric.data}, or leave checkpoint_metric unset")
        if name == metric.key:
            return
        keys = {m.key: m.name for m in DEV_METRICS.values()}
        hint = (f"; {name!r} is the {keys[name]} metric's key: set dev_metric={keys[name]} to score with it"
                if name in keys else f"; {name!r} is a metric's name, its key is {DEV_METRICS[name].key!r}"
                if name in DEV_METRICS else "")
        chosen = "dev_metric" if self.dev_metric else f"method {self.method}'s dev metric"
        raise bad(f"checkpoint_metric {name!r} is not what this run's checkpoints are scored on: {metric.key!r} "
                  f"({metric.name}, {chosen}); set checkpoint_metric={metric.key} or leave it unset{hint}")

    def _validate_elastic(self, bad) -> None:
        """What an elastic run needs, checked before Ray starts."""
        if len(self.num_workers) != 2:
            raise bad(f"num_workers must be a number or [min, max], got {self.num_workers}")
        low, high = self.num_workers
        if low < 1:
            raise bad(f"num_workers {self.num_workers}: an elastic run needs at least 1 Ray Train worker "
                      "(local mode, 0, runs in the driver and cannot resize)")
        if low > high:
            raise bad(f"num_workers {self.num_workers}: min {low} is more than max {high}")
        uneven = [w for w in range(low, high + 1) if self.batch_size % w]
        if uneven:
            step = math.lcm(*range(low, high + 1))
            fits = max(step, self.batch_size // step * step)
            raise bad(f"batch_size={self.batch_size} (global) does not split evenly over {uneven[0]} worker(s), a "
                      f"world size num_workers {self.num_workers} allows: every size from {low} to {high} must "
                      f"divide it (a multiple of {step}, e.g. batch_size={fits})")
        if self.max_failures == 0:
            raise bad(f"num_workers {self.num_workers}: an elastic run restarts on the workers left when one is "
                      "lost, which Ray Train counts as a failure: set max_failures (e.g. 10; -1: no limit)")
        if self.feed == "stream":
            raise bad("feed=stream: an elastic run takes every global batch as train.global_order names it, from "
                      "the set each worker holds: set feed=auto or feed=memory")
        if self.length_bucketing:
            raise bad("length_bucketing regroups each worker's own stream; an elastic run takes every global batch "
                      "as train.global_order names it: set length_bucketing=0")
        if self.pretokenize:
            raise bad("pretokenize tokenizes in Ray Data, which an elastic run does not stream from (each worker "
                      "reads the set): set pretokenize=false")
        if not self.resize_check_s > 0:
            raise bad("resize_check_s must be > 0")
        # a resized run trains the fixed-size run's model only with dropout keyed by global row, which exists on
        # the unpadded path alone (train.unpadded, train.dropout_keys)
        if self.compile:
            raise bad(f"num_workers {self.num_workers}: compile=true runs the stock forward, whose dropout is drawn "
                      "per worker, so a resized run would train another model: set compile=false (compile_layers "
                      "keeps the keyed dropout)")
        if not self.unpad:
            raise bad(f"num_workers {self.num_workers}: unpad=false runs the stock forward, whose dropout is drawn "
                      "per worker, so a resized run would train another model: set unpad=true")

    @property
    def options(self):
        """The options of the selected method."""
        return self.method_options[self.method]

    @property
    def name(self) -> str:
        """The run's folder under storage_path: ``run_name`` with ``{model}`` replaced by the base model's short
        name (``configs/*.yaml``: ``simcse-unsup-{model}``); without a run_name, ``{method}-{model}``
        (``simcse_unsup-all-MiniLM-L6-v2``)."""
        return (self.run_name or f"{self.method}-{{model}}").replace("{model}", model_short_name(self.model))

    def to_dict(self) -> dict:
        """Plain dict: top-level fields plus one nested dict per method section."""
        out = {
            f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "method_options"
        }
        for name, opts in self.method_options.items():
            out[name] = dataclasses.asdict(opts)
        return out

    @classmethod
    def from_dict(cls, data: dict, source: str = "<dict>") -> TrainConfig:
        """Build from a dict shaped like the YAML file (unknown keys raise ConfigError)."""
        from train.methods import METHODS

        data = dict(data or {})
        for key in [k for k in data if isinstance(k, str) and "." in k]:  # flat "ease.key" (e.g. from tune)
            section, _, sub = key.partition(".")
            value = data.pop(key)
            sec = data.get(section)
            if not isinstance(sec, dict):
                if sec is not None or section not in METHODS:
                    raise ConfigError(f"{source}: unknown key {key!r}; sections: {sorted(METHODS)}")
                sec = data[section] = {}
            sec[sub] = value
        sections = {k: data.pop(k) for k in list(data) if k in METHODS}
        for name, sec in sections.items():
            if sec is None:
                sections[name] = {}
            elif not isinstance(sec, dict):
                raise ConfigError(f"{source}: section {name!r} must be a mapping, got {type(sec).__name__}")
        data.pop("method_options", None)
        cfg = _build_dataclass(cls, data, "top level", source, extra_valid=sorted(METHODS))
        cfg.method_options = {
            name: _build_dataclass(
                METHODS[name].Options, sections.get(name, {}), f"section {name!r}", source, prefix=f"{name}."
            )
            for name in METHODS
        }
        return cfg

    def with_overrides(self, overrides: list[str] | tuple[str, ...], source: str = "overrides") -> TrainConfig:
        data = self.to_dict()
        apply_overrides(data, overrides)
        return TrainConfig.from_dict(data, source=source)

    def validate(self) -> TrainConfig:
        """Check values (not just types); raises ConfigError. Returns self."""
        from train.methods import METHODS

        bad = _invalid
        self._validate_choices(bad, METHODS)
        self._validate_names(bad)
        self._validate_sizes(bad)
        self._validate_workers(bad)
        self._validate_dev_data(bad)
        self._validate_checkpoint_metric(bad)
        METHODS[self.method].validate_options(self.options, self)
        return self

    def _validate_choices(self, bad, methods) -> None:
        """Each setting that names one of a few choices, and the pairs of them that cannot run together."""
        for key, choices in (("method", sorted(methods)), ("pooling", list(POOLINGS)),
                             ("mixed_precision", list(MIXED_PRECISION)), ("dtype", ["float32", "float64"])):
            if getattr(self, key) not in choices:
                raise bad(f"{key} {getattr(self, key)!r} is not one of {choices}")
        if self.dtype == "float64" and self.mixed_precision not in ("none", "auto"):
            raise bad(f"dtype=float64 runs without mixed precision (mixed_precision={self.mixed_precision})")
        if self.mixed_precision in ("fp16", "bf16_weights") and not self.use_gpu:
            # bf16_weights on CPU: its LayerNorm and embedding gradients would be summed in bf16 there
            raise bad(f"mixed_precision={self.mixed_precision} needs use_gpu=true (use bf16 on CPU)")

    def _validate_names(self, bad) -> None:
        """No secret in the config; a run name that is one folder; data and model given."""
        from infra.secrets import SecretInConfigError, check_no_secrets

        try:
            check_no_secrets(self.to_dict(), "config")
        except SecretInConfigError as e:
            raise bad(str(e)) from None
        if not RUN_NAME.fullmatch(self.name):
            raise bad(f"run_name {self.name!r} must be letters, digits, '.', '_' or '-' (it names a folder under "
                      "storage_path; no '/' or '..')")
        if not self.data:
            raise bad("data is empty: give the ingest output folder (data=PATH or --data PATH)")
        if not self.model:
            raise bad("model is empty")

    def _validate_sizes(self, bad) -> None:
        """Counts, rates and limits in their ranges."""
        for key in ("max_len", "epochs", "batch_size"):
            if getattr(self, key) < 1:
                raise bad(f"{key} must be >= 1, got {getattr(self, key)}")
        for key in ("lr", "temperature"):
            if not getattr(self, key) > 0:
                raise bad(f"{key} must be > 0, got {getattr(self, key)}")
        if self.feed not in FEEDS:
            raise bad(f"feed must be one of {', '.join(FEEDS)}, got {self.feed!r}")
        if self.feed == "memory" and (self.pretokenize or self.length_bucketing):
            raise bad("feed=memory: pretokenize and length_bucketing work on Ray Data's stream; set feed=stream "
                      "(or auto) or turn them off")
        if self.worker_start_timeout_s is not None and not self.worker_start_timeout_s > 0:
            raise bad("worker_start_timeout_s must be > 0 or null")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise bad(f"chunk_size must be >= 1 or null, got {self.chunk_size}")
        if self.length_bucketing < 0:
            raise bad(f"length_bucketing must be >= 0, got {self.length_bucketing}")
        if self.max_steps is not None and self.max_steps < 1:
            raise bad(f"max_steps must be >= 1 or null, got {self.max_steps}")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise bad(f"dropout must be in [0, 1), got {self.dropout}")
        for key in ("checkpoint_every_steps", "warmup_steps", "shuffle_buffer", "log_every_steps", "loss_tile"):
            if getattr(self, key) is not None and getattr(self, key) < 0:
                raise bad(f"{key} must be >= 0")
        if self.max_failures < -1:
            raise bad("max_failures must be >= 0, or -1 (no limit)")
        if self.keep_checkpoints < 1:
            raise bad("keep_checkpoints must be >= 1")
        if self.cpus_per_worker is not None and self.cpus_per_worker <= 0:
            raise bad("cpus_per_worker must be > 0 or null")
        if not self.validation_timeout_s > 0:
            raise bad("validation_timeout_s must be > 0")

    def _validate_workers(self, bad) -> None:
        """The workers (elastic or fixed) and the global batch they split."""
        if self.elastic:
            self._validate_elastic(bad)
        elif self.num_workers < 0:
            raise bad(f"num_workers must be >= 0, got {self.num_workers}")
        world = max(self.max_workers, 1)
        if self.batch_size % world:
            raise bad(f"batch_size={self.batch_size} (global) is not divisible by num_workers={world}")
        if self.batch_size // world < 2:
            raise bad("each worker needs a local batch of at least 2 (in-batch negatives)")

    def _validate_dev_data(self, bad) -> None:
        """A dev set that is there (a path, a URI, or a name on the hub for its metric)."""
        if self.dev_data is not None or self.dev_metric is not None:
            metric = metric_for(self)
            if (self.dev_data is not None and not is_uri(self.dev_data) and not Path(local_path(self.dev_data)).exists()
                    and not metric.named_on_the_hub(self.dev_data)):
                raise bad(f"dev_data {self.dev_data!r} does not exist (the {metric.name} metric reads {metric.data})")


def metric_for(cfg: TrainConfig):
    """The dev metric (``score.dev_metrics.DevMetric``) of a config: ``cfg.dev_metric``, else the method's own."""
    from score.dev_metrics import DEV_METRICS
    from train.methods import get_method

    name = cfg.dev_metric or get_method(cfg.method).dev_metric
    if name not in DEV_METRICS:
        declared = "" if cfg.dev_metric else f" (declared by method {cfg.method!r})"
        raise ConfigError(f"dev_metric {name!r}{declared} is not one of {sorted(DEV_METRICS)}")
    return DEV_METRICS[name]


def read_yaml_mapping(path: str | Path, what: str) -> dict:
    """The mapping a YAML file (local or at a URI) holds; a ``ConfigError`` naming the file when it is missing,
    not YAML, or not a mapping at its top level. An empty file is an empty mapping."""
    try:
        data = yaml.safe_load(read_text(str(path), what)) or {}
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def load_config(yaml_path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML config and apply ``key=value`` / ``section.key=value`` overrides.

    Override values are parsed as YAML scalars (``true``, ``null``, ``3``,
    ``1e-5``). Raises ConfigError naming the key and the file on an unknown
    key or a wrong type; values are checked by :meth:`TrainConfig.validate`
    (called by ``build_trainer``), not here, so a config may be completed by
    overrides later.
    """
    source = str(yaml_path) if yaml_path else "<defaults>"
    data = read_yaml_mapping(yaml_path, "config file") if yaml_path else {}
    TrainConfig.from_dict(copy.deepcopy(data), source=source)  # report file errors against the file
    if overrides:
        apply_overrides(data, overrides)
        keys = {item.split("=", 1)[0].strip() for item in overrides}
        if "pooling" in keys and "base_pooling" not in keys:  # a pooling asked for by name is used as asked
            data["base_pooling"] = False
        source = f"{source} + overrides {list(overrides)}"
    return TrainConfig.from_dict(data, source=source)


def apply_overrides(data: dict, overrides) -> dict:
    """Apply ``key=value`` / ``section.key=value`` strings to a YAML-shaped dict in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        try:
            value = yaml.safe_load(raw) if raw.strip() != "" else ""
        except yaml.YAMLError:
            value = raw
        parts = key.split(".")
        if len(parts) == 1:
            data[key] = value
        elif len(parts) == 2:
            sec = data.setdefault(parts[0], {})
            if sec is None:
                sec = data[parts[0]] = {}
            if not isinstance(sec, dict):
                raise ConfigError(f"override {item!r}: {parts[0]!r} is not a section")
            sec[parts[1]] = value
        else:
            raise ConfigError(f"override {item!r}: keys are 'key' or 'section.key'")
    return data


# ---------------------------------------------------------------- type checks


RENAMED_KEYS = {"dev_sts": "dev_data", "evaluator_timeout_s": "validation_timeout_s"}


def _build_dataclass(cls, values: dict, where: str, source: str, *, prefix: str = "", extra_valid=()):
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name != "method_options"]
    kwargs = {}
    for key, value in values.items():
        if key in RENAMED_KEYS and cls is TrainConfig:
            raise ConfigError(f"{source}: key {key!r} is now {RENAMED_KEYS[key]!r}")
        if key not in names:
            valid = ", ".join(names + [f"{s} (section)" for s in extra_valid])
            raise ConfigError(f"{source}: unknown key {prefix + str(key)!r} ({where}); valid keys: {valid}")
        kwargs[key] = _coerce(value, hints[key], f"{prefix}{key}", source)
    return cls(**kwargs)


def _coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # numpy scalars (tune samples)
        value = value.item()
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, args, key, source)
    coerced = _coerce_one(value, tp, origin, args, key, source)
    if coerced is _WRONG:
        raise ConfigError(f"{source}: key {key!r} expects {getattr(tp, '__name__', tp)}, got {value!r} "
                          f"({type(value).__name__})")
    return coerced


def _coerce_union(value: Any, args: tuple, key: str, source: str) -> Any:
    """The first of a union's types that ``value`` reads as (None for an optional's None)."""
    if value is None and type(None) in args:
        return None
    inner = [a for a in args if a is not type(None)]
    for option in inner[:-1]:
        try:
            return _coerce(value, option, key, source)
        except ConfigError:
            pass
    try:
        return _coerce(value, inner[-1], key, source)
    except ConfigError:
        if len(inner) == 1:
            raise
        names = " or ".join(str(getattr(a, "__name__", a)) if typing.get_origin(a) is None else str(a) for a in inner)
        raise ConfigError(f"{source}: key {key!r} expects {names}, got {value!r} ({type(value).__name__})") from None


_WRONG = object()  # _coerce_one: the value is not of the type


def _coerce_one(value: Any, tp: Any, origin: Any, args: tuple, key: str, source: str) -> Any:
    """``value`` as ``tp`` (one type, not a union), or ``_WRONG``: no bool for an int, an int for a whole float,
    a float from YAML's "3e-5" string."""
    if tp is bool:
        return value if isinstance(value, bool) else _WRONG
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return int(value) if isinstance(value, float) and value.is_integer() else _WRONG
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # PyYAML reads "3e-5" (no dot) as a string
            try:
                out = float(value)
            except ValueError:
                return _WRONG
            return out if math.isfinite(out) else _WRONG
        return _WRONG
    if tp is str:
        return value if isinstance(value, str) else _WRONG
    if origin is list:
        if not isinstance(value, (list, tuple)):
            return _WRONG
        return [_coerce(v, args[0], key, source) for v in value] if args else list(value)
    if tp is dict or origin is dict:
        return value if isinstance(value, dict) else _WRONG
    return value
