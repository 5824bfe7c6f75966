"""Pass 1 of ingest as a Ray Data read (``--pass1 data``): the units of
``ingest/units.py`` are the read tasks of a ``ray.data.Datasource``.

``Pass1UnitsDatasource`` returns one ``ReadTask`` per unit, a Wikipedia shard
(a run of bz2 streams of a multistream dump, or a whole non-indexed file) or a
Wikidata range, in the order given (the pipeline puts the biggest first). A
read task runs ``process_unit``, which writes the unit's files and its
done-marker as side effects (so a unit whose done-marker matches is skipped
inside its task, ``resumed``), and yields the unit's result as a one-row
block; the driver collects those rows. Ray Data's streaming executor
schedules the tasks (1 CPU each), applies backpressure, reports progress, and
runs a task again when its worker dies (at most 3 times; the unit rewrites its
files under the same names). The output is byte-identical to the default way.

The default way, one plain ``ray.remote`` task per unit, is in
``ingest/pipeline.py`` (``--pass1 tasks``). It stays the default because it
measured faster: on the 2-core bench (``bench/ingest.py``), this read ran at
0.91x the tasks' pages/s with 1 worker and 0.81x with 2 (2-worker scaling 1.72
against 1.93), from a fixed cost of about 2.5 s per job (Ray Data's import on
the driver and on each worker, its stats and autoscaling actors) and a wait
of about 0.07 s between one unit's end and the next one's start
(``docs/performance.md``). This module imports Ray Data, so the pipeline imports it
only for ``--pass1 data``.
"""

from __future__ import annotations

import json
import warnings
from functools import partial

import pyarrow as pa
import ray
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from ingest.units import process_unit

MAX_RETRIES = 3  # a unit whose worker dies is run again (it rewrites its files under the same names)

RESULT = pa.schema(
    [
        pa.field("kind", pa.string()),
        pa.field("unit_id", pa.int64()),
        pa.field("result", pa.string()),  # the unit's result, JSON (the manifests are built from it)
        pa.field("peak_rss_mb", pa.float64()),
        pa.field("resumed", pa.bool_()),
    ]
)


def _unit_path(unit: dict) -> str | None:
    try:
        return json.loads(unit["spec"]).get("path")
    except (ValueError, AttributeError):
        return None


def _read_unit(unit: dict, out: str, cfg: dict):
    """One read task: run the unit (files + done-marker), yield its result row as a block."""
    yield pa.Table.from_pylist([process_unit(unit, out, cfg)], schema=RESULT)


class Pass1UnitsDatasource(Datasource):
    """The units of pass 1 as a Ray Data source: one read task per unit, in the given order."""

    def __init__(self, units: list[dict], out: str, cfg: dict):
        self.units = units
        self.out = out
        self.cfg = cfg

    def get_name(self) -> str:
        return "Pass1Units"  # the operator shows as ReadPass1Units in progress and logs

    def estimate_inmemory_data_size(self) -> int | None:
        return None  # one small row per unit; the units' output goes to files, not to the object store

    def get_read_tasks(self, parallelism: int, per_task_row_limit=None, data_context=None) -> list:
        # one task per unit whatever `parallelism` says: a unit's files are named by its id
        tasks = []
        for unit in self.units:
            path = _unit_path(unit)
            metadata = BlockMetadata(num_rows=1, size_bytes=None, exec_stats=None,
                                     input_files=(path,) if path else None)
            tasks.append(ReadTask(partial(_read_unit, unit, self.out, self.cfg), metadata, schema=RESULT))
        return tasks


def run_units_data(units: list[dict], out: str, cfg: dict) -> list[dict]:
    """Pass 1 as a Ray Data read: the units' result rows, in no particular order."""
    if not units:
        return []
    with warnings.catch_warnings():
        # read_datasource's `ray_remote_args` is deprecated in Ray 2.60 (to go in 2.64), but no named
        # parameter sets max_retries, and Ray Data's own default retries a dead worker's task forever
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        ds = ray.data.read_datasource(
            Pass1UnitsDatasource(units, out, cfg),
            num_cpus=1,
            override_num_blocks=len(units),  # = the read tasks: no splitting, no size estimate
            ray_remote_args={"max_retries": MAX_RETRIES},
        )
    # One operator, so no downstream operator to reserve CPUs for. With the reservation on, the
    # executor held freed CPUs back (measured with 1 s read tasks on 2 CPUs: the next task started
    # up to 0.15 s after a CPU freed, the second 1.2 s after the first; without it, 0.01 s).
    ds.context.op_resource_reservation_enabled = False
    return ds.take_all()
