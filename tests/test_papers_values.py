"""The configs carry their papers' hyperparameters, and each value is checked against the text it comes from.

``PAPERS_VALUES`` is typed in from the sources, not read from the configs: each row is
(config, key, value, source, written, quote): ``quote`` is a verbatim excerpt of ``source``
(a paper in ``../shared/papers/`` or ``../shared/docs/methods.md``, whitespace aside) and
``written`` is how that excerpt writes the value. So a config edited away from its paper fails
``test_configs_carry_the_papers_values`` by name, and a row whose quote is not in the paper, or
whose quote does not say the value, fails ``test_each_value_is_quoted_from_its_source``.

The paper texts are extracted from PDFs: math-mode numbers come out written three times
(``Batch size 141414``) and formulas lose their symbols, so ``written`` may be a tripled number,
and a value the source gives by leaving a term out (no warm-up, no weight on a negative) is a
zero with ``written=None`` or a negation ("did not use").
"""

from __future__ import annotations

import math
import re

import pytest

from tests.conftest import REPO, SHARED_DATA
from train.config import load_config

SOURCES = {"methods.md": SHARED_DATA.parent / "docs" / "methods.md",
           **{f"{p}.txt": SHARED_DATA.parent / "papers" / f"{p}.txt"
              for p in ("ease", "gausscse", "rse", "aspectcse", "dsbats")}}

TABLE4_ASPECTCSE = {  # AspectCSE Table 4 ("AspectCSE fine-tuning configuration"); §5.1 reuses it for the MNRL baseline
    "epochs": (3, "333", "Training epochs 333"),
    "batch_size": (14, "141414", "Batch size 141414"),
    "lr": (5e-5, "5e-5", "Learning rate 5e55𝑒55e-5"),
    "max_len": (320, "320320320", "Max sequence length 320320320"),
    "temperature": (0.05, "0.050.050.05", "Temperature for softmax 0.050.050.05"),
}

PAPERS_VALUES = [
    # Unsupervised SimCSE, BERT-base (Gao et al. 2021; the paper is not in shared/papers: methods.md §1)
    ("simcse_unsup", "batch_size", 64, "methods.md", "64", "| batch size | 64 | 512 | 512 |"),
    ("simcse_unsup", "lr", 3e-5, "methods.md", "3e-5", "| lr (base / large) | 3e-5 / 1e-5 |"),
    ("simcse_unsup", "epochs", 1, "methods.md", "1", "Epochs: 1 unsupervised, 3 supervised."),
    ("simcse_unsup", "max_len", 32, "methods.md", "32", "3 supervised. max_len 32."),
    ("simcse_unsup", "temperature", 0.05, "methods.md", "0.05", "sim = cosine; τ = 0.05."),
    ("simcse_unsup", "dropout", 0.1, "methods.md", "0.1", "different dropout masks (p = 0.1)"),
    ("simcse_unsup", "pooling", "cls_mlp", "methods.md", "mlp_only_train",
     "`mlp_only_train` (unsupervised): the MLP is used in training and dropped at test time."),
    ("simcse_unsup", "checkpoint_every_steps", 125, "methods.md", "125",
     "Best checkpoint on STS-B dev, checked every 125 steps"),
    # Supervised SimCSE, BERT-base (methods.md §1)
    ("simcse_sup", "batch_size", 512, "methods.md", "512", "| batch size | 64 | 512 | 512 |"),
    ("simcse_sup", "lr", 5e-5, "methods.md", "5e-5", "| lr (base / large) | 3e-5 / 1e-5 | 1e-5 / 3e-5 | 5e-5 / 1e-5 |"),
    ("simcse_sup", "epochs", 3, "methods.md", "3", "Epochs: 1 unsupervised, 3 supervised."),
    ("simcse_sup", "temperature", 0.05, "methods.md", "0.05", "sim = cosine; τ = 0.05."),
    ("simcse_sup", "pooling", "cls", "methods.md", "supervised models with `cls`",
     "evaluate supervised models with `cls`, unsupervised with `cls_before_pooler`"),
    ("simcse_sup", "simcse_sup.hard_negative_weight", 0.0, "methods.md", "0",
     "added only to the anchor's own hard-negative logit (default 0)"),
    # EASE, monolingual BERT-base (Nishikawa et al. 2022, Appendix A Table 9; the code's values: methods.md §3)
    ("ease", "batch_size", 64, "ease.txt", "64", "| EASE-BERTbase | 64 | 3e-05 |"),
    ("ease", "lr", 3e-5, "ease.txt", "3e-05", "| EASE-BERTbase | 64 | 3e-05 |"),
    ("ease", "epochs", 1, "methods.md", "1", "Common: 1 epoch, warmup 500, fp16, max_len 32"),
    ("ease", "max_len", 32, "methods.md", "32", "Common: 1 epoch, warmup 500, fp16, max_len 32"),
    ("ease", "warmup_steps", 500, "methods.md", "500", "Common: 1 epoch, warmup 500, fp16, max_len 32"),
    ("ease", "temperature", 0.05, "methods.md", "0.05", "L = 1·L_SimCSE(τ = 0.05) + λ·L_ent"),
    ("ease", "ease.ease_loss_ratio", 0.01, "methods.md", "0.01", "with λ = `ease_loss_ratio` = 0.01."),
    ("ease", "ease.hard_negative_weight", 1.0, "methods.md", "1.0", "with w = `hard_negative_weight` = 1.0."),
    ("ease", "pooling", "cls_mlp", "methods.md", "mlp_only_train",
     "Monolingual: `pooler_type=cls` in training and `mlp_only_train`."),
    # GaussCSE, BERT-base (Yoda et al. 2023, Appendix E and Table 5; methods.md §4)
    ("gausscse", "epochs", 3, "gausscse.txt", "3", "The fine-tuning epoch size is 3,"),
    ("gausscse", "temperature", 0.05, "gausscse.txt", "0.05", "the temperature hyperparameter is 0.05,"),
    ("gausscse", "batch_size", 16, "gausscse.txt", "16",  # the best BERT-base cell: batch 16, lr 5e-5 (66.21)
     "1e-5 3e-5 5e-5 BERT-base 16 63.05 65.72 66.21"),
    ("gausscse", "lr", 5e-5, "gausscse.txt", "5e-5", "1e-5 3e-5 5e-5 BERT-base 16 63.05 65.72 66.21"),
    ("gausscse", "checkpoint_every_steps", 100, "gausscse.txt", "100",
     ("the AUC of the precision-recall curve for the NLI task on the SNLI development set was calculated every 100 "
      "training steps")),
    ("gausscse", "gausscse.variant", "ent+con+rev", "gausscse.txt", "all sets (ent+con+rev)",
     "the entailment and reversed sets (ent+rev), and all sets (ent+con+rev)."),
    # RSE, BERT-base STS (Wang & Li 2022, §4.1 and Appendix D; the code's values: methods.md §2c)
    ("rse", "epochs", 3, "rse.txt", "3", "We train our model for 3 epochs in all experiments"),
    ("rse", "batch_size", 512, "methods.md", "512", "Batch 512, GradCache chunk 256, 3 epochs."),
    ("rse", "chunk_size", 256, "methods.md", "256", "Batch 512, GradCache chunk 256, 3 epochs."),
    ("rse", "lr", 5e-5, "methods.md", "5e-5", "Encoder lr 5e-5; **relation embeddings lr 1e-2**"),
    ("rse", "rse.relation_lr", 1e-2, "methods.md", "1e-2", "Encoder lr 5e-5; **relation embeddings lr 1e-2**"),
    ("rse", "temperature", 0.05, "rse.txt", "0.050.050.05", "The temperature hyperparameter is set to 0.050.050.05"),
    ("rse", "max_len", 32, "rse.txt", "32", "the maximum sentence length is set to 32."),
    ("rse", "warmup_steps", 0, "rse.txt", "did not use", "We did not use warm-up or weight decay in all experiments."),
    ("rse", "weight_decay", 0.0, "rse.txt", "did not use", "We did not use warm-up or weight decay in all experiments."),
    ("rse", "checkpoint_every_steps", 125, "rse.txt", "125",
     "evaluate every 125, 1000, and 500 steps for best checkpoint selection on STS, USEB, and Transfer tasks"),
    # the STS weights, in the order of the STS relations (methods.md §2c, §2e): one row for each half
    ("rse", "rse.sts_weights", {"entailment": 1.0, "duplicate_question": 0.5}, "methods.md",
     "`entailment` + `duplicate_question`", "Relations `entailment` + `duplicate_question`, 330k each"),
    ("rse", "rse.sts_weights", {"entailment": 1.0, "duplicate_question": 0.5}, "methods.md", "--sim_func 1.0 0.5",
     "For STS, `--sim_func 1.0 0.5` gives weights 2/3 and 1/3."),
    # AspectCSE, BERT-base (Schopf et al. 2023, Table 4, §3.1, §5.2; methods.md §5)
    *[("aspectcse", key, value, "aspectcse.txt", written, quote)
      for key, (value, written, quote) in TABLE4_ASPECTCSE.items()],
    ("aspectcse", "pooling", "cls", "aspectcse.txt", "CLS", "Pooler type CLS"),
    ("aspectcse", "model", "bert-base-uncased", "aspectcse.txt", "BERTbase", "For fine-tuning, we use BERTbase"),
    ("aspectcse", "aspectcse.hard_negatives", True, "aspectcse.txt", "(anchor, positive, negative) triplets",
     "AspectCSE uses (anchor, positive, negative) triplets to train aspect-specific sentence embedding models."),
    ("aspectcse", "aspectcse.hard_negative_weight", 0.0, "aspectcse.txt", None,  # §3.1 Eq. 1 weighs no term
     "use a cross-entropy-loss with negatives per anchor-positive pair and random in-batch negatives."),
    # its baseline: MNRL on anchor-positive pairs, MEAN pooling (AspectCSE §3.2, §5.1; Ostendorff et al. 2022)
    *[("aspectcse_mnrl", key, value, "aspectcse.txt", written, quote)
      for key, (value, written, quote) in TABLE4_ASPECTCSE.items()],
    ("aspectcse_mnrl", "pooling", "mean", "aspectcse.txt", "MEAN pooling",
     ("we use the same configuration, except that we follow the approach of Ostendorff et al. (2022), and apply "
      "MEAN pooling.")),
    ("aspectcse_mnrl", "model", "bert-base-uncased", "aspectcse.txt", "BERTbase", "For fine-tuning, we use BERTbase"),
    ("aspectcse_mnrl", "aspectcse.hard_negatives", False, "aspectcse.txt", "Anchor-Positive Pairs Only",
     "3.2 Multiple Negative Ranking Using Anchor-Positive Pairs Only"),
    # DSBATS-sn (Zhang Qixuan, slides 2023; methods.md §6): the slides give the loss and the base models and
    # no hyperparameters, so only these two keys have a source (the rest of configs/dsbats.yaml is our choice)
    ("dsbats", "model", "bert-base-uncased", "dsbats.txt", "BERT", "Baseline models: BERT (Devlin et al., 2019)"),
    ("dsbats", "dsbats.positive_in_denominator", False, "dsbats.txt", "only use the example as $p_i^-$",
     "We only use the example as $p_i^-$ as negative example, different from InfoNCE."),
]
CONFIG_METHOD = {"aspectcse_mnrl": "aspectcse"}  # configs that are another configuration of a method
NUMBER_WORDS = {"no", "not", "without"}  # how a source gives a zero it does not print


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _number(written: str) -> float:
    """The number ``written`` says; a math-mode number tripled by the PDF extraction ("141414") counts once."""
    third = len(written) // 3
    if third and written == written[:third] * 3:
        written = written[:third]
    return float(written)


def _config_value(config: str, key: str):
    got = load_config(REPO / "configs" / f"{config}.yaml")
    assert got.method == CONFIG_METHOD.get(config, config), config
    for part in key.split("."):
        got = getattr(got, part)
    return got


def test_configs_carry_the_papers_values():
    wrong = [f"configs/{config}.yaml {key} = {got!r}, {source} says {value!r} ({quote!r})"
             for config, key, value, source, _, quote in PAPERS_VALUES
             if (got := _config_value(config, key)) != value]
    assert not wrong, "\n".join(wrong)
    assert {c for c, *_ in PAPERS_VALUES} == {p.stem for p in (REPO / "configs").glob("*.yaml")} - {
        "dsbats_other_clusters"}  # every method's config (the other-clusters variant is ours, not a paper's)


def test_each_value_is_quoted_from_its_source():
    missing = [str(p) for p in SOURCES.values() if not p.is_file()]
    if missing:
        pytest.skip(f"papers not present: {', '.join(missing)}")
    texts = {name: _normalised(path.read_text(encoding="utf-8")) for name, path in SOURCES.items()}
    wrong = []
    for config, key, value, source, written, quote in PAPERS_VALUES:
        where = f"{config}.{key} ({source})"
        if _normalised(quote) not in texts[source]:
            wrong.append(f"{where}: quote not in the source: {quote!r}")
        elif written is None:
            if value not in (0, False):
                wrong.append(f"{where}: only a zero or off value may be given by the source leaving it out")
        elif written not in quote:
            wrong.append(f"{where}: {written!r} is not in the quote {quote!r}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            said = 0.0 if set(written.lower().split()) & NUMBER_WORDS else _number(written)
            if not math.isclose(said, value, rel_tol=1e-9, abs_tol=1e-12):
                wrong.append(f"{where}: the source writes {written!r}, the row says {value!r}")
        elif isinstance(value, dict):
            numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", written)]
            names = re.findall(r"`(\w+)`", written)
            if numbers != [float(v) for v in value.values()] and names != list(value):
                wrong.append(f"{where}: {written!r} gives neither the weights nor the relations of {value}")
    assert not wrong, "\n".join(wrong)
