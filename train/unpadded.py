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
the dropout masks are drawn over real tokens only, the same distribution, on
CPU with p rounded to 1/32768). The padded positions of the returned (B, L, d)
tensor are zero, where the stock forward has values no pooling reads.
MiniLM-L6, batch 32 SNLI pairs, one CPU thread: a training step 1.37 s ->
0.95 s.

``unpadded_forward_columns`` runs several columns of a batch (premises and
hypotheses) as one token matrix, attention per column: 0.94 -> 0.86 s per
step, and a GradCache step (half-size chunks, whose GEMMs gain most) 1.30 ->
1.13 s.

In training on CPU, dropout draws its masks four elements per 64-bit random
number (`_bernoulli_dropout`) instead of one ``bernoulli_`` draw each (10-16 ->
5-6 ns per element, forward; ``F.dropout``'s draws were about 10% of a step),
and attention with dropout takes the eager arithmetic (SDPA's CPU dropout path
is slower).

Used by ``train.encoder.Encoder`` for the models ``supports_unpadding``
accepts (BERT encoders with absolute positions); others take the stock forward.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from train.dropout_keys import ROW_KEYS, keyed_dropout, mix, token_keys


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
    column = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    return unpadded_forward_columns(model, [column])[0]


def unpadded_forward_columns(model, columns: list[dict], compiled: bool = False) -> list[torch.Tensor]:
    """`unpadded_forward` of several token dicts at once (a batch's columns:
    anchors, positives, ...). The real tokens of all of them form one matrix for
    the per-token layers, so each projection is one larger GEMM instead of one
    per column; attention runs per column, padded to that column's longest row.
    ``compiled``: each layer's per-token part after attention through `compiled_token_layers`."""
    packings = [_Packing(column["attention_mask"]) for column in columns]
    token_ids, token_types, positions = [], [], []
    for column, packing in zip(columns, packings):
        input_ids, token_type_ids = column["input_ids"], column.get("token_type_ids")
        if token_type_ids is None:  # explicit: the embeddings' buffered default is max_position_embeddings long
            token_type_ids = torch.zeros_like(input_ids)
        position_ids = torch.arange(packing.length, device=input_ids.device).expand(packing.rows, -1)
        token_ids.append(packing.real(input_ids.reshape(-1)))
        token_types.append(packing.real(token_type_ids.reshape(-1)))
        positions.append(packing.real(position_ids.reshape(-1)))
    embeddings = model.embeddings
    hidden = (_word_vectors(embeddings.word_embeddings, torch.cat(token_ids))
              + embeddings.token_type_embeddings(torch.cat(token_types))
              + embeddings.position_embeddings(torch.cat(positions)))
    # dropout masks keyed by the rows' places in the global batch (train.dropout_keys), when the loop gave them
    keyed = model.training and all(column.get(ROW_KEYS) is not None for column in columns)
    position_keys = hidden_keys = None
    if keyed:
        position_keys = [token_keys(column[ROW_KEYS], packing.length) for column, packing in zip(columns, packings)]
        hidden_keys = torch.cat([packing.real(k.reshape(-1)) for k, packing in zip(position_keys, packings)])
    hidden = _dropout(embeddings.LayerNorm(hidden), embeddings.dropout, hidden_keys, site=0)
    counts = [packing.count for packing in packings]
    token_layers = compiled_token_layers() if compiled and not keyed else _token_layers
    eager = getattr(model.config, "_attn_implementation", None) == "eager"

    for index, layer in enumerate(model.encoder.layer):
        attention = layer.attention.self
        heads, head_size = attention.num_attention_heads, attention.attention_head_size
        scale = getattr(attention, "scaling", head_size**-0.5)
        dropout = attention.dropout.p if attention.training else 0.0
        projected = [projection(hidden).split(counts) for projection in (attention.query, attention.key, attention.value)]
        contexts = []
        for i, packing in enumerate(packings):
            query, key, value = (
                packing.padded(tokens[i]).view(packing.rows, packing.length, heads, head_size).transpose(1, 2)
                for tokens in projected
            )
            attention_keys = (position_keys[i], 3 * index + 1) if keyed else None
            context = _attend(query, key, value, packing.keys, scale, dropout, eager, attention_keys)
            contexts.append(packing.real(context.transpose(1, 2).reshape(-1, heads * head_size)))
        context = torch.cat(contexts) if len(contexts) > 1 else contexts[0]
        if keyed:
            hidden = token_layers(layer, context, hidden, hidden_keys, 3 * index + 2)
        else:
            hidden = token_layers(layer, context, hidden)

    width = hidden.shape[-1]
    return [packing.padded(tokens).view(packing.rows, packing.length, width)
            for packing, tokens in zip(packings, hidden.split(counts))]


@contextlib.contextmanager
def one_word_embedding_backward(model):
    """Within the block, the backward passes through ``model``'s word embeddings
    (in `unpadded_forward_columns`) only collect (token ids, gradient rows); on
    leaving it, they are added to ``word_embeddings.weight.grad`` at once.

    For GradCache (``train.step``), which runs one backward per chunk. Each
    backward of ``nn.Embedding`` writes a dense (vocabulary x d) gradient: for
    MiniLM a fresh 47 MB buffer, zeroed, page-faulted in and then added to
    ``.grad``. With k chunks that is k of them per step where the uncached step
    has one; here a GradCache step has one too, of all chunks' rows. Equal
    gradients (the same sums, in another order). Not re-entrant per model.

    The rows collected are bounded by the vocabulary: once they outnumber its
    rows, they are added to one dense buffer of the gradient's size (so a step
    of a million pairs, ~27 million token rows, holds one 94 MB buffer for
    BERT-base, not 85 GB of rows)."""
    words = model.embeddings.word_embeddings
    collected = _WordGradients(words)
    _deferred_word_gradients[words] = collected
    try:
        yield
    finally:
        del _deferred_word_gradients[words]
    collected.add_to_grad()


_deferred_word_gradients: dict = {}


class _WordGradients:
    def __init__(self, words: torch.nn.Embedding):
        self.words = words
        # the weight as the block is entered: the fp32 master when train.precision's bf16 copies are
        # swapped in inside the block, so the rows (bf16 then) are summed in float32 into its .grad
        self.weight = words.weight
        self.ids: list[torch.Tensor] = []
        self.rows: list[torch.Tensor] = []
        self.count = 0  # rows collected and not yet summed
        self.summed: torch.Tensor | None = None  # (vocabulary x d) sum of the rows flushed so far

    def collect(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        self.ids.append(ids)
        self.rows.append(rows)
        self.count += ids.numel()
        if self.count > self.weight.shape[0]:  # more rows than the dense buffer has: sum them into it
            if self.summed is None:
                self.summed = torch.zeros_like(self.weight)
            self._add_rows(self.summed)

    def _add_rows(self, target: torch.Tensor) -> None:
        ids, rows = torch.cat(self.ids), torch.cat(self.rows).to(target.dtype)
        self.ids, self.rows, self.count = [], [], 0
        if self.words.padding_idx is not None:  # nn.Embedding never updates its padding row
            real = ids != self.words.padding_idx
            ids, rows = ids[real], rows[real]
        target.index_add_(0, ids, rows)

    def add_to_grad(self) -> None:
        if not self.rows and self.summed is None:
            return
        weight = self.weight
        if weight.grad is None:
            weight.grad = self.summed if self.summed is not None else torch.zeros_like(weight)
        elif self.summed is not None:
            weight.grad += self.summed
        if self.rows:
            self._add_rows(weight.grad)


class _DeferredLookup(torch.autograd.Function):
    """``weight[ids]`` whose backward hands its gradient rows to a `_WordGradients`."""

    @staticmethod
    def forward(ctx, weight, ids, collected):
        ctx.save_for_backward(ids)
        ctx.collected = collected
        return weight.index_select(0, ids)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        ctx.collected.collect(ids, grad)
        return None, None, None


def _word_vectors(words: torch.nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    collected = _deferred_word_gradients.get(words)
    if collected is None or not torch.is_grad_enabled() or not words.weight.requires_grad:
        return words(ids)
    return _DeferredLookup.apply(words.weight, ids, collected)


class _Packing:
    """Where one column's real tokens sit among its (rows x length) positions.

    A column without padding (every row as long as the longest: full-length or truncated text) is
    its own packing: ``real`` and ``padded`` are reshapes, not copies, and attention takes no mask
    (SDPA's flash kernel). With the index ops and the masked attention on full-length batches this
    path was slower than the stock forward (H100, BERT-base, 512 x 128, bf16: 151 ms of GPU time a
    step vs 128 ms; ``docs/performance.md``)."""

    def __init__(self, attention_mask: torch.Tensor):
        self.rows, self.length = attention_mask.shape
        is_real = attention_mask.bool()
        self.index = is_real.reshape(-1).nonzero().squeeze(1)
        self.count = self.index.numel()
        self.full = self.count == self.rows * self.length
        self.keys = None if self.full else is_real[:, None, None, :]  # attention's mask: real keys only

    def real(self, positions: torch.Tensor) -> torch.Tensor:
        """(rows * length, ...) -> (real tokens, ...)"""
        return positions if self.full else positions.index_select(0, self.index)

    def padded(self, tokens: torch.Tensor) -> torch.Tensor:
        """(real tokens, d) -> (rows * length, d), zeros at the pads"""
        if self.full:
            return tokens
        return tokens.new_zeros(self.rows * self.length, tokens.shape[-1]).index_copy(0, self.index, tokens)


def _attend(query, key, value, keys, scale: float, dropout: float, eager: bool,
            dropout_keys: tuple[torch.Tensor, int] | None = None) -> torch.Tensor:
    """Attention over the real keys (``keys`` None: every key is real): SDPA, or with ``attn_implementation: eager`` the
    same arithmetic as transformers' eager attention (an additive mask of the dtype's minimum).

    On CPU with attention dropout (training) the eager arithmetic runs either way, with
    `_bernoulli_dropout`: there SDPA's dropout path is slower (MiniLM, batch 32 SNLI
    pairs, one thread: a step 0.95 -> 0.91 s before the cheaper masks)."""
    keyed = dropout > 0 and dropout_keys is not None
    if not eager and not keyed and not (dropout > 0 and query.device.type == "cpu"):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=keys, scale=scale, dropout_p=dropout)
    scores = torch.matmul(query, key.transpose(2, 3)) * scale
    if keys is not None:
        scores = scores + torch.zeros_like(keys, dtype=scores.dtype).masked_fill(~keys, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if keyed:  # (rows, heads, queries, keys): each (row, head, query position) keyed, the key positions its features
        position_keys, site = dropout_keys
        heads = torch.arange(weights.shape[1], device=weights.device, dtype=torch.int64)
        weights = keyed_dropout(weights, mix(position_keys[:, None, :] + heads[None, :, None]), site, dropout)
    elif dropout > 0:
        weights = _bernoulli_dropout(weights, dropout)
    return torch.matmul(weights, value)


def _token_layers(layer, context: torch.Tensor, hidden: torch.Tensor, keys: torch.Tensor | None = None,
                  site: int = 0) -> torch.Tensor:
    """A BERT layer after its attention: output projection, dropout, residual, LayerNorm, then the
    feed-forward block (dense, GELU, dense, dropout, residual, LayerNorm), on (tokens, d) states.
    ``keys``: the tokens' dropout keys (train.dropout_keys); the two dropouts are sites ``site``, ``site + 1``."""
    attended = _add_and_norm(layer.attention.output, context, hidden, keys, site)
    return _add_and_norm(layer.output, layer.intermediate(attended), attended, keys, site + 1)


_compiled_token_layers = None


def compiled_token_layers():
    """`_token_layers` through ``torch.compile``: the bias adds, GELU, dropout, residual adds and
    LayerNorms fused around the three GEMMs of each layer. One compilation serves every layer (the
    layer is an input, its parameters guarded by shape and dtype) and every token count
    (``dynamic=True``: the real tokens of a batch vary from step to step)."""
    global _compiled_token_layers
    if _compiled_token_layers is None:
        # a graph per (dtype, grad mode, autocast, dropout p): GradCache's no-grad pass and its replay, a
        # run's eval forwards... past dynamo's default of 8 it would fall back to eager without a word
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _compiled_token_layers = torch.compile(_token_layers, dynamic=True)
    return _compiled_token_layers


def _add_and_norm(output, states: torch.Tensor, residual: torch.Tensor, keys: torch.Tensor | None = None,
                  site: int = 0) -> torch.Tensor:
    """transformers' ``BertSelfOutput`` / ``BertOutput`` forward, its dropout by `_dropout`."""
    return output.LayerNorm(_dropout(output.dense(states), output.dropout, keys, site) + residual)


def _dropout(states: torch.Tensor, module: torch.nn.Dropout, keys: torch.Tensor | None = None,
             site: int = 0) -> torch.Tensor:
    if not module.training or module.p == 0:
        return states
    if keys is not None:
        return keyed_dropout(states, keys, site, module.p)
    return _bernoulli_dropout(states, module.p)


def _bernoulli_dropout(states: torch.Tensor, p: float) -> torch.Tensor:
    """``F.dropout(states, p)``, about 2.5x faster on CPU.

    On CPU ``F.dropout`` draws each element's mask with its own ``bernoulli_`` call
    into the Mersenne twister (about 9 ns per element on one thread, 10-16 ns for
    the whole dropout), and in a MiniLM training step those draws took about 10%
    of the time. Here one 64-bit draw (``random_``: 63 uniform bits) gives four
    16-bit lanes; an element is kept when the low 15 bits of its lane are at or
    above a threshold, so P(drop) is ``p`` rounded to 1/32768 (0.1 -> 0.100006).
    The mask stays int16 (a bool conversion would cost as much as the compare);
    4-6 ns per element in all. The draws come from torch's generator, so a
    ``manual_seed`` fixes the masks and GradCache's RNG replay redraws the same
    ones. On CUDA ``F.dropout`` (Philox, fused) runs as it is."""
    dropped = round(p * 32768)  # of the 32768 values of a lane's low 15 bits
    if states.device.type != "cpu" or dropped >= 32768:
        return F.dropout(states, p=p, training=True)
    count = states.numel()
    words = torch.empty(-(-count // 4), dtype=torch.int64).random_()
    keep = words.view(torch.int16).bitwise_and(0x7FFF).ge_(dropped)[:count].view(states.shape)  # 1 or 0
    return _MaskedScale.apply(states, keep, 32768 / (32768 - dropped))


class _MaskedScale(torch.autograd.Function):
    """``states * keep * scale`` that keeps the 0/1 int16 mask (not a float one) for backward."""

    @staticmethod
    def forward(ctx, states, keep, scale):
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return states.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None
