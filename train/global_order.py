"""The rows of every global step as a function of (seed, epoch, step) alone: what an elastic run trains on.

A fixed-size run streams its set through Ray Data, whose split hands blocks to whichever worker asks
first: the rows of a step depend on the number of workers and on timing. An elastic run
(``num_workers: [min, max]``) must train on the same rows at step s with 4, 3 or 1 workers, and resume
at the next global step after a resize, so its workers do not stream: each reads the training set's
columns once (Arrow, in memory; :class:`SetRows`) and takes its share of the global batch that
:class:`GlobalOrder` names:

    epoch = step // steps_per_epoch               steps_per_epoch = rows // batch_size
    order = permutation(rows, seed=(seed, epoch))  (file order when shuffling is off)
    batch(step) = order[i * batch_size : (i + 1) * batch_size]     i = step % steps_per_epoch
    share(step, rank, world) = batch(step)[rank * batch_size / world : (rank + 1) * batch_size / world]

so the global batch, its rows and their order in the gathered embeddings (rank-major) are the same at
every world size; only which worker embeds which rows changes. Sample ids are row positions in the set
(its files in name order, rows in file order).
"""

from __future__ import annotations

import json
import os

import numpy as np


class GlobalOrder:
    def __init__(self, num_rows: int, batch_size: int, seed: int, shuffle: bool = True):
        if num_rows < batch_size:
            raise ValueError(f"{num_rows} rows give no full global batch of {batch_size}")
        self.num_rows, self.batch_size, self.seed, self.shuffle = num_rows, batch_size, seed, shuffle
        self.steps_per_epoch = num_rows // batch_size
        self._epoch, self._order = None, None

    def epoch_of(self, step: int) -> int:
        return step // self.steps_per_epoch

    def order(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._epoch = epoch
            self._order = (np.random.default_rng([self.seed, epoch]).permutation(self.num_rows) if self.shuffle
                           else np.arange(self.num_rows))
        return self._order

    def batch(self, step: int) -> np.ndarray:
        """The row ids of global step ``step`` (0-based: the step that takes the run from ``step`` to ``step+1``)."""
        i = step % self.steps_per_epoch
        return self.order(self.epoch_of(step))[i * self.batch_size:(i + 1) * self.batch_size]

    def share(self, step: int, rank: int, world: int) -> np.ndarray:
        if self.batch_size % world:
            raise ValueError(f"global batch {self.batch_size} does not split evenly over {world} workers")
        per = self.batch_size // world
        return self.batch(step)[rank * per:(rank + 1) * per]


class SetRows:
    """The columns ``columns`` of the set at ``path`` read once into memory; ``take(ids)`` is a numpy batch as
    Ray Data's ``batch_format="numpy"`` gives it (strings as object arrays). ``path``: the set as the driver
    checked it (an ``setformat.io.PinnedSet``: exactly its files, each read only if it is the file checked, else
    a one-line ``SchemaError`` naming the set and the job to rerun), or a folder or URI (pinned here)."""

    def __init__(self, path, columns: list[str]):
        from setformat.io import PinnedSet, pin_set, read_pinned_file

        pinned = path if isinstance(path, PinnedSet) else pin_set(path)
        tables = [read_pinned_file(pinned, f, columns) for f in pinned.files]
        self.table = (tables[0] if len(tables) == 1 else _concat(tables)).combine_chunks()

    def __len__(self) -> int:
        return self.table.num_rows

    def take(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        rows = self.table.take(ids)
        return {name: rows.column(name).to_numpy(zero_copy_only=False) for name in rows.column_names}


def _concat(tables):
    import pyarrow as pa

    return pa.concat_tables(tables, promote_options="default")


class SampleLog:
    """What each worker trained on, for checking an elastic run (``log_sample_ids``): one JSON line per step,
    ``{"step", "rank", "world", "ids"}``, in ``{run_folder}/sample_ids/rank{r}-of{w}-from{start}.jsonl``, the
    lines since the last checkpoint appended at each checkpoint (``infra.appendlog.append_text``: the bytes written
    grow with the steps, not with their square). Lines of steps after a run's last checkpoint are lost with
    it, and trained again by the next attempt."""

    def __init__(self, run_folder: str, rank: int, world: int, start_step: int):
        self.path = f"{run_folder}/sample_ids/rank{rank}-of{world}-from{start_step:07d}.jsonl"
        self.rank, self.world, self.lines = rank, world, []

    def add(self, step: int, ids: np.ndarray) -> None:
        self.lines.append(json.dumps({"step": step, "rank": self.rank, "world": self.world,
                                      "ids": [int(i) for i in ids]}))

    def flush(self) -> None:
        from infra.appendlog import append_text

        if self.lines:
            append_text(self.path, "\n".join(self.lines) + "\n")
            self.lines = []


def read_sample_logs(run_folder: str) -> dict[int, list[list[int]]]:
    """``{step: [the global batch's ids as trained, once per attempt that trained it]}`` from a run's sample
    logs: each attempt's shares of a step concatenated in rank order (the global batch's order)."""
    from infra.appendlog import appended_logs, read_appended

    shares: dict[tuple[int, str, int], dict[int, list[int]]] = {}
    for path in appended_logs(f"{run_folder}/sample_ids", ".jsonl"):
        attempt = os.path.basename(path).split("-from", 1)[1]
        for line in read_appended(path).splitlines():
            if line.strip():
                row = json.loads(line)
                shares.setdefault((row["step"], attempt, row["world"]), {})[row["rank"]] = row["ids"]
    steps: dict[int, list[list[int]]] = {}
    for (step, _, world), by_rank in sorted(shares.items()):
        if len(by_rank) == world:  # every rank's share of this attempt's step was written
            steps.setdefault(step, []).append([i for rank in range(world) for i in by_rank[rank]])
    return steps
