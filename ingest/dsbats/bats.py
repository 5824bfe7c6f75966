"""The BATS 3.0 folder (Gladkova, Drozd & Matsuoka 2016): categories and their analogy pairs.

Layout: ``BATS_3.0/`` (or the folder itself) holds four section folders,
``1_Inflectional_morphology`` (I01–I10), ``2_Derivational_morphology``
(D01–D10), ``3_Encyclopedic_semantics`` (E01–E10) and
``4_Lexicographic_semantics`` (L01–L10), each file named like
``E07 [animal - sound].txt`` and holding one line per analogy pair,
``word<TAB>answer1/answer2/...`` (several gold answers are common).

``read_bats(folder, categories)`` returns one :class:`BatsLine` per line of
the chosen categories; a line that does not parse (no tab, an empty word or
no answer) is not an error but a counted skip, reported with its file and
line number (``BatsFolder.skipped``), and an answer listed twice on one
line is one pair (``BatsFolder.duplicate_answers`` counts the repeats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# DSBATS-sn's 20 semantic categories (the slides; the morphology folders are not used)
DEFAULT_CATEGORIES = tuple([f"E{i:02d}" for i in range(1, 11)] + [f"L{i:02d}" for i in range(1, 11)])
_FILE = re.compile(r"^(?P<code>[IDEL]\d{2}) \[(?P<relation>[^\]]+)\]\.txt$")
_CODE = re.compile(r"^[IDEL]\d{2}$")


@dataclass(frozen=True)
class BatsLine:
    category: str  # E07
    relation: str  # animal - sound
    line: int  # 1-based line number in its file
    word: str
    answers: tuple[str, ...]


@dataclass
class BatsFolder:
    root: Path
    files: dict[str, Path]  # category -> file
    relations: dict[str, str]  # category -> relation name
    lines: list[BatsLine] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {file, line, reason}
    duplicate_answers: int = 0  # an answer listed twice on its line: one pair, counted once as dropped


def check_categories(categories) -> list[str]:
    """Category codes as given (E01, L10, ...); a malformed one is a ValueError naming it."""
    codes = [str(c).strip().upper() for c in categories]
    bad = [c for c in codes if not _CODE.match(c)]
    if bad or not codes:
        raise ValueError(f"BATS categories: {bad or codes!r} — expected codes like E01 … E10, L01 … L10 "
                         "(I01–I10, D01–D10 name the morphology folders)")
    return sorted(set(codes), key=codes.index)


def category_files(folder: str | Path) -> tuple[Path, dict[str, Path], dict[str, str]]:
    """``(root, {code: file}, {code: relation})`` of every BATS file under ``folder``
    (the ``BATS_3.0`` folder itself or its parent)."""
    root = Path(folder).expanduser()
    if (root / "BATS_3.0").is_dir():
        root = root / "BATS_3.0"
    if not root.is_dir():
        raise FileNotFoundError(f"BATS folder {root}: not a directory")
    files, relations = {}, {}
    for path in sorted(root.glob("*/*.txt")):
        m = _FILE.match(path.name)
        if m:
            files[m["code"]] = path
            relations[m["code"]] = m["relation"].strip()
    if not files:
        raise FileNotFoundError(f"BATS folder {root}: no file named like 'E07 [animal - sound].txt' in its "
                                "section folders (3_Encyclopedic_semantics/, 4_Lexicographic_semantics/, ...)")
    return root, files, relations


def read_bats(folder: str | Path, categories=DEFAULT_CATEGORIES) -> BatsFolder:
    codes = check_categories(categories)
    root, files, relations = category_files(folder)
    missing = [c for c in codes if c not in files]
    if missing:
        raise FileNotFoundError(f"BATS folder {root}: no file for categories {missing} "
                                f"(found {sorted(files)})")
    out = BatsFolder(root, {c: files[c] for c in codes}, {c: relations[c] for c in codes})
    for code in codes:
        path = files[code]
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 ({e})") from None
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            word, tab, rest = raw.partition("\t")
            listed = [a.strip().lower() for a in rest.split("/") if a.strip()]
            answers = tuple(dict.fromkeys(listed))
            reason = ("no tab between word and answers" if not tab else
                      "empty word" if not word.strip() else "no answer" if not answers else None)
            if reason:
                out.skipped.append({"file": str(path), "line": number, "reason": reason})
                continue
            out.duplicate_answers += len(listed) - len(answers)
            out.lines.append(BatsLine(code, relations[code], number, word.strip().lower(), answers))
    return out
