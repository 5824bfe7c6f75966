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
    """Build a lowercase WordPiece vocabulary from ``texts`` and save a randomly
    initialised ``BertModel`` with its tokenizer to ``out_dir``. Same texts and
    seed give the same files."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer = Tokenizer(models.WordPiece(wordpiece_vocabulary(texts, normalizer, pre_tokenizer, vocab_size),
                                           unk_token="[UNK]"))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
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


def wordpiece_vocabulary(texts: Iterable[str], normalizer, pre_tokenizer, vocab_size: int) -> dict[str, int]:
    """Special tokens, every character (alone and as a ``##`` continuation),
    then the most frequent words, ties broken alphabetically.

    Built by hand rather than with ``tokenizers``' WordPiece trainer, whose
    tie-breaking follows per-process hash seeds: the same corpus gave a
    different vocabulary in another process, and so a different model.
    """
    from collections import Counter

    words: Counter = Counter()
    for text in texts:
        if text:
            words.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for word in words for c in word})
    tokens = [*SPECIAL_TOKENS, *chars, *(f"##{c}" for c in chars)]
    known = set(tokens)
    for word, _ in sorted(words.items(), key=lambda wc: (-wc[1], wc[0])):
        if len(tokens) >= vocab_size:
            break
        if word not in known:
            tokens.append(word)
            known.add(word)
    return {token: index for index, token in enumerate(tokens)}
