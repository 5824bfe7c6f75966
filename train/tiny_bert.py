"""A tiny BERT built from a config, with a WordPiece vocabulary trained on a corpus.

Tests and the demo use it so that nothing is downloaded: the result is an
ordinary Hugging Face model folder (``config.json``, weights, tokenizer files)
that every code path loading "any Hugging Face model path or name" accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_bert(
    texts: Iterable[str],
    out_dir: str | Path,
    *,
    vocab_size: int = 3000,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 128,
    seed: int = 0,
) -> Path:
    """Train a lowercase WordPiece vocabulary on ``texts`` and save a randomly
    initialised ``BertModel`` with its tokenizer to ``out_dir``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS)
    tokenizer.train_from_iterator((t for t in texts if t), trainer=trainer)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer.decoder = decoders.WordPiece()
    fast = BertTokenizerFast(tokenizer_object=tokenizer, do_lower_case=True, model_max_length=max_position_embeddings)
    fast.save_pretrained(out)

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
    )
    BertModel(config).save_pretrained(out)
    return out
