"""Result tables: fixed-width text for the terminal, JSON + markdown on disk.

``columns`` is a sequence whose items are a row key, or a ``(key, header)``
pair; floats are printed with 4 decimals, missing values as ``-``; a key
``delta_…`` (a difference to the base, :func:`compare_with_base`) with its sign::

    format_table(rows, [("model", "model"), ("sts_dev_spearman", "STS dev Spearman"),
                        ("sts_test_spearman", "STS test Spearman")])

Every table of results carries the untrained base encoder as a row of its own,
scored in the same run on the same data: :func:`compare_with_base` adds a ``Δ``
column per metric (row − base) and a ``vs base`` column that marks a model
which is not above the base on its own metric(s) (``≤ base``);
:func:`below_base_line` says the same in one line for the end of a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

Column = str | tuple[str, str]


def normalise_columns(rows: list[dict], columns: Sequence[Column] | None) -> list[tuple[str, str]]:
    """``(key, header)`` pairs; by default every key, in first-seen order."""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    return [(c, c) if isinstance(c, str) else (c[0], c[1]) for c in columns]


def format_cell(value, signed: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:+.4f}" if signed else f"{value:.4f}"
    return str(value)


def table_cells(rows: list[dict], columns) -> tuple[list[str], list[list[str]]]:
    pairs = normalise_columns(rows, columns)
    headers = [header for _, header in pairs]
    body = [[format_cell(row.get(key), signed=key.startswith(DELTA_PREFIX)) for key, _ in pairs] for row in rows]
    return headers, body


# ---------------------------------------------------------------- the base row and the difference to it

DELTA_PREFIX = "delta_"
VS_BASE = ("vs_base", "vs base")
BASE_MARK = "base"  # the base row's own vs-base cell
NOT_ABOVE = "≤ base"
ABOVE = "above base"


def compare_with_base(rows: list[dict], base_model: str | None, metrics: Sequence[Column],
                      own: dict[str, Sequence[str]] | None = None, mode: str = "max",
                      base_label: str = "base") -> tuple[list[dict], list[tuple[str, str]], list[dict]]:
    """The rows with the difference of each metric to the base row's (the row whose ``model`` is
    ``base_model``), and the columns to show it.

    Each row gets ``delta_<key>`` (row − base; None on the base row and where either is missing) per metric
    and ``vs_base``:
    ``base`` on the base row, ``≤ base: <headers>`` on a row that is not above the base on one of its own
    metrics (``own[model]``: metric keys; default every metric; ``mode`` min: lower is better), ``above base``
    otherwise, ``-`` when no own metric can be compared. Returns (rows, the Δ columns and ``vs base``, the
    rows not above the base: ``{"model", "metric", "value", "base"}`` per metric). Without a base row the
    rows come back as they were, with no columns and nothing below."""
    pairs = normalise_columns(rows, metrics)
    base = next((r for r in rows if r.get("model") == base_model), None) if base_model is not None else None
    if base is None:
        return [dict(r) for r in rows], [], []
    out, below = [], []
    for row in rows:
        row = dict(row)
        for key, _ in pairs:
            value, reference = row.get(key), base.get(key)
            row[DELTA_PREFIX + key] = (float(value) - float(reference) if _is_score(value) and _is_score(reference)
                                       and row is not base and row.get("model") != base_model else None)
        if row.get("model") == base_model:
            row[VS_BASE[0]] = BASE_MARK
        else:
            judged = [(k, h) for k, h in pairs if own is None or row.get("model") not in own
                      or k in own[row["model"]]]
            judged = [(k, h) for k, h in judged if row[DELTA_PREFIX + k] is not None]
            worse = [(k, h) for k, h in judged if (row[DELTA_PREFIX + k] <= 0 if mode == "max"
                                                    else row[DELTA_PREFIX + k] >= 0)]
            row[VS_BASE[0]] = ("-" if not judged else f"{NOT_ABOVE}: " + ", ".join(h for _, h in worse) if worse
                               else ABOVE)
            below += [{"model": row.get("model"), "metric": h, "value": float(row[k]), "base": float(base[k]),
                       "base_label": base_label} for k, h in worse]
        out.append(row)
    columns = [(DELTA_PREFIX + k, f"Δ {h}") for k, h in pairs] + [VS_BASE]
    return out, columns, below


def _is_score(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


def below_base_line(below: list[dict], base_label: str, what: str = "models") -> str:
    """One line for the end of a run: which models are not above the untrained base (and on what), or that
    every one is."""
    if not below:
        return f"every one of the {what} is above the untrained base ({base_label}) on its own metric(s)"
    by_model: dict = {}
    for b in below:
        by_model.setdefault(b["model"], []).append(f"{b['metric']} {b['value']:.4f} vs {b['base']:.4f}")
    return (f"not above the untrained base ({base_label}): "
            + "; ".join(f"{m} ({', '.join(v)})" for m, v in by_model.items()))


def format_table(rows: list[dict], columns: Sequence[Column] | None = None) -> str:
    """A fixed-width text table: text left-aligned, numbers right-aligned."""
    headers, body = table_cells(rows, columns)
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    numeric = [all(is_number(r[i]) for r in body) and bool(body) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return " | ".join(c.rjust(w) if num else c.ljust(w)
                          for c, w, num in zip(cells, widths, numeric)).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(headers), rule] + [line(r) for r in body])


def format_markdown(rows: list[dict], columns: Sequence[Column] | None = None) -> str:
    headers, body = table_cells(rows, columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in body]
    return "\n".join(lines)


def write_report(path: str | Path, rows: list[dict], columns: Sequence[Column] | None = None,
                 title: str | None = None, note: str | None = None, after: str | None = None) -> tuple[Path, Path]:
    """Write ``<path>.json`` (the rows) and ``<path>.md`` (a markdown table).

    ``path`` may end in ``.json`` or ``.md`` or have no suffix; both files
    share its stem. ``note``: a paragraph under the title (the split and the
    similarity the table used); ``after``: text under the table. Returns
    ``(json_path, markdown_path)``.
    """
    base = Path(path)
    if base.suffix in (".json", ".md"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = base.with_name(base.name + ".json"), base.with_name(base.name + ".md")
    json_path.write_text(json.dumps(rows, indent=2, default=str) + "\n", encoding="utf-8")
    heading = (f"# {title}\n\n" if title else "") + (f"{note}\n\n" if note else "")
    md_path.write_text(heading + format_markdown(rows, columns) + "\n" + (f"\n{after}\n" if after else ""),
                       encoding="utf-8")
    return json_path, md_path


def is_number(cell: str) -> bool:
    if cell == "-":
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True
