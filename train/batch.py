"""Batches as the loop moves them: tokenization (in the step or in Ray Data workers), padding to
the batch's longest row, row slicing for GradCache chunks, and sorted-length bucketing.

A collated batch is a dict whose values are tensors with rows on dim 0, or
token dicts (``input_ids``, ``attention_mask``[, ``token_type_ids``]) of one
text column each. Every helper here keeps that shape.

Pre-tokenized columns (``pretokenize``) are stored by Ray Data as
``{column}.input_ids`` / ``{column}.attention_mask`` / ``{column}.token_type_ids``
int32 arrays padded to ``max_len`` (and ``{column}.present``: not null or empty); :func:`tokens_of` cuts them to the longest
row of the training batch, so padding is per batch either way.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

TOKEN_FIELDS = ("input_ids", "attention_mask", "token_type_ids")


def is_tokens(value) -> bool:
    return isinstance(value, dict) and "input_ids" in value


def tokens_of(batch: dict[str, np.ndarray], column: str, encoder) -> dict[str, torch.Tensor]:
    """The token dict of ``column``: cut from Ray Data's pre-tokenized arrays, or tokenized here."""
    if f"{column}.input_ids" in batch:
        mask = np.asarray(batch[f"{column}.attention_mask"])
        longest = max(int(mask.sum(axis=1).max()), 1) if len(mask) else 1
        return {
            f: torch.from_numpy(np.ascontiguousarray(batch[f"{column}.{f}"][:, :longest], dtype=np.int64))
            for f in TOKEN_FIELDS
            if f"{column}.{f}" in batch
        }
    texts = batch[column]
    return encoder.tokenize(["" if t is None else str(t) for t in texts])


def present(batch: dict[str, np.ndarray], column: str) -> np.ndarray:
    """Bool per row: the text of ``column`` is neither null nor empty (raw or pre-tokenized batch)."""
    if f"{column}.present" in batch:
        return np.asarray(batch[f"{column}.present"], dtype=bool)
    return np.array([t is not None and str(t) != "" for t in batch[column]], dtype=bool)


def to_device(batch: dict, device) -> dict:
    return {
        k: to_device(v, device) if isinstance(v, dict) else v.to(device, non_blocking=True) for k, v in batch.items()
    }


def collated_ahead(batches, collate) -> Iterator[tuple[dict, dict]]:
    """``(batch, collate(batch))`` for each of ``batches``, the next one read and collated in a thread
    while the caller trains on this one (the loop on a GPU: tokenization, which the fast tokenizers run
    outside the GIL, overlaps the step's kernel launches instead of adding to them). One read at a time,
    in order; an error of the feed or of ``collate`` is raised here, at the batch it belongs to."""
    from concurrent.futures import ThreadPoolExecutor

    rows = iter(batches)

    def read():
        batch = next(rows, None)
        return None if batch is None else (batch, collate(batch))

    with ThreadPoolExecutor(1, thread_name_prefix="collate-ahead") as pool:
        pending = pool.submit(read)
        while (item := pending.result()) is not None:
            pending = pool.submit(read)
            yield item


def num_rows(batch: dict) -> int:
    for v in batch.values():
        return num_rows(v) if isinstance(v, dict) else int(v.shape[0])
    raise ValueError("empty batch")


def slice_rows(batch: dict, start: int, stop: int) -> dict:
    """Rows [start, stop) of every tensor; token dicts are also cut to the chunk's longest row."""
    out = {}
    for k, v in batch.items():
        if is_tokens(v):
            mask = v["attention_mask"][start:stop]
            longest = max(int(mask.sum(dim=1).max()), 1)
            out[k] = {f: t[start:stop, :longest] if t.dim() == 2 else t[start:stop] for f, t in v.items()}
        elif isinstance(v, dict):
            out[k] = slice_rows(v, start, stop)
        else:
            out[k] = v[start:stop]
    return out


def cat_rows(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Concatenate per-chunk embedding dicts along rows."""
    return {k: torch.cat([p[k] for p in parts], dim=0) for k in parts[0]}


# ------------------------------------------------------------------ tokenization in Ray Data workers


_TOKENIZERS: dict = {}


def _tokenize_batch(batch: dict[str, np.ndarray], model: str, max_len: int, columns: list[str]) -> dict:
    """Ray Data ``map_batches`` function: text columns -> fixed-width token arrays (padded to max_len).
    The tokenizer is loaded once per worker process."""
    if model not in _TOKENIZERS:
        from transformers import AutoTokenizer

        _TOKENIZERS[model] = AutoTokenizer.from_pretrained(model)
    tokenizer = _TOKENIZERS[model]
    for col in columns:
        texts = ["" if t is None else str(t) for t in batch.pop(col)]
        batch[f"{col}.present"] = np.array([t != "" for t in texts])
        enc = tokenizer(texts, padding="max_length", truncation=True, max_length=max_len)
        for f in TOKEN_FIELDS:
            if f in enc:
                batch[f"{col}.{f}"] = np.asarray(enc[f], dtype=np.int32)
    return batch


def pretokenize(ds, model: str, max_len: int, columns: list[str], batch_size: int = 1024):
    """``ds`` with ``columns`` replaced by their token arrays, tokenized in Ray Data tasks (not in
    the training step). ``model`` is the tokenizer's path or name."""
    return ds.map_batches(
        _tokenize_batch,
        fn_kwargs={"model": model, "max_len": max_len, "columns": list(columns)},
        batch_size=batch_size,
        batch_format="numpy",
    )


# ------------------------------------------------------------------ sorted-length bucketing


def row_lengths(batch: dict[str, np.ndarray], column: str) -> np.ndarray:
    """Tokens per row of ``column`` (pre-tokenized) or characters (raw text): the sort key."""
    if f"{column}.attention_mask" in batch:
        return np.asarray(batch[f"{column}.attention_mask"]).sum(axis=1)
    return np.fromiter((len(str(t)) for t in batch[column]), dtype=np.int64, count=len(batch[column]))


def length_buckets(
    batches: Iterator[dict[str, np.ndarray]], column: str, window: int, seed: int
) -> Iterator[dict[str, np.ndarray]]:
    """Sorted-length bucketing: take ``window`` batches, sort their rows by length, cut them into
    batches of the same size again and yield those in a seeded random order. Every row is kept
    once; each batch holds rows of similar length, so padding (and compute) shrinks. It changes
    which rows are in-batch negatives of each other (similar lengths), so it is an option."""
    rng = np.random.default_rng(seed)
    pending: list[dict[str, np.ndarray]] = []

    def flush():
        size = len(next(iter(pending[0].values())))
        merged = {k: np.concatenate([b[k] for b in pending]) for k in pending[0]}
        order = np.argsort(row_lengths(merged, column), kind="stable")
        cut = [order[i : i + size] for i in range(0, len(order), size)]
        for j in rng.permutation(len(cut)):
            yield {k: v[cut[j]] for k, v in merged.items()}
        pending.clear()

    for b in batches:
        pending.append(b)
        if len(pending) == window:
            yield from flush()
    if pending:
        yield from flush()
