"""Result tables: fixed-width text for the terminal, JSON + markdown on disk.

``columns`` is a sequence whose items are a row key, or a ``(key, header)``
pair; floats are printed with 4 decimals, missing values as ``-``::

    format_table(rows, [("model", "model"), ("sts_dev_spearman", "STS dev Spearman"),
                        ("sts_test_spearman", "STS test Spearman")])
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


def format_cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def table_cells(rows: list[dict], columns) -> tuple[list[str], list[list[str]]]:
    pairs = normalise_columns(rows, columns)
    headers = [header for _, header in pairs]
    body = [[format_cell(row.get(key)) for key, _ in pairs] for row in rows]
    return headers, body


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
                 title: str | None = None) -> tuple[Path, Path]:
    """Write ``<path>.json`` (the rows) and ``<path>.md`` (a markdown table).

    ``path`` may end in ``.json`` or ``.md`` or have no suffix; both files
    share its stem. Returns ``(json_path, markdown_path)``.
    """
    base = Path(path)
    if base.suffix in (".json", ".md"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = base.with_name(base.name + ".json"), base.with_name(base.name + ".md")
    json_path.write_text(json.dumps(rows, indent=2, default=str) + "\n", encoding="utf-8")
    heading = f"# {title}\n\n" if title else ""
    md_path.write_text(heading + format_markdown(rows, columns) + "\n", encoding="utf-8")
    return json_path, md_path


def is_number(cell: str) -> bool:
    if cell == "-":
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True
