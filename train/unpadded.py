"""BERT's forward with its per-token layers run on the real tokens only.

Contrastive batches of short sentences are mostly padding: on SNLI at batch
32 and max_len 32 about 44% of the (rows x longest row) positions are pads,
and every Linear, GELU and LayerNorm of every layer computes them for nothing.
Only attention mixes tokens. ``unpadded_forward`` keeps the hidden states as
one (real tokens, d) matrix, runs the model's own modules (transformers'
``BertSelfAttention`` projections, ``BertSelfOutput``, ``BertIntermediate``,
``BertOutput``) on it, and scatters into the padded (B, L, heads, d_head)
shape only around scaled dot-product attention, masked to real keys.

Real tokens get the stock forward's values (equal in eval mode; in training
the dropout masks are drawn over real tokens only, the same distribution).
The padded positions of the returned (B, L, d) tensor are zero, where the
stock forward has values no pooling reads. MiniLM-L6, batch 32 SNLI pairs,
one CPU thread: a training step 1.37 s -> 0.95 s.

Used by ``train.encoder.Encoder`` for the models ``supports_unpadding``
accepts (BERT encoders with absolute positions); others take the stock forward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def supports_unpadding(model) -> bool:
    config = model.config
    return (
        config.model_type == "bert"
        and not getattr(config, "is_decoder", False)
        and not getattr(config, "add_cross_attention", False)
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
        and hasattr(model, "embeddings")
        and hasattr(model, "encoder")
    )


def unpadded_forward(model, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
    """``model(input_ids, attention_mask, token_type_ids).last_hidden_state`` at
    the real tokens (``attention_mask`` 1), zeros at the pads."""
    rows, length = input_ids.shape
    is_real = attention_mask.bool()
    real = is_real.reshape(-1).nonzero().squeeze(1)
    hidden = model.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
    width = hidden.shape[-1]
    hidden = hidden.reshape(rows * length, width).index_select(0, real)
    keys = is_real[:, None, None, :]
    eager = getattr(model.config, "_attn_implementation", None) == "eager"

    def padded(tokens: torch.Tensor) -> torch.Tensor:
        return tokens.new_zeros(rows * length, tokens.shape[-1]).index_copy(0, real, tokens)

    for layer in model.encoder.layer:
        attention = layer.attention.self
        heads, head_size = attention.num_attention_heads, attention.attention_head_size
        query, key, value = (
            padded(projection(hidden)).view(rows, length, heads, head_size).transpose(1, 2)
            for projection in (attention.query, attention.key, attention.value)
        )
        context = _attend(query, key, value, keys, getattr(attention, "scaling", head_size**-0.5),
                          attention.dropout.p if attention.training else 0.0, eager)
        context = context.transpose(1, 2).reshape(rows * length, heads * head_size).index_select(0, real)
        attended = layer.attention.output(context, hidden)
        hidden = layer.output(layer.intermediate(attended), attended)
    return padded(hidden).view(rows, length, width)


def _attend(query, key, value, keys, scale: float, dropout: float, eager: bool) -> torch.Tensor:
    """Attention over the real keys: SDPA, or with ``attn_implementation: eager`` the
    same arithmetic as transformers' eager attention (an additive mask of the dtype's minimum)."""
    if not eager:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=keys, scale=scale, dropout_p=dropout)
    scores = torch.matmul(query, key.transpose(2, 3)) * scale
    scores = scores + torch.zeros_like(keys, dtype=scores.dtype).masked_fill(~keys, torch.finfo(scores.dtype).min)
    weights = F.dropout(scores.softmax(dim=-1), p=dropout, training=dropout > 0)
    return torch.matmul(weights, value)
