"""The C loops of ingest/_structcse_wikitext.c give exactly what their Python specifications
in ingest/wikitext.py give: on every page of the real samples, in each language's
rules, and on random text made of the characters the loops decide on."""

from __future__ import annotations

import random

import pytest

from ingest import wikitext
from ingest.wikitext import GENERIC_RULES, SENTENCE_RULES, Link, base_language
from tests.test_wikitext import BGWIKI, ENWIKI, TABLES, real_pages

_wikitext_c = wikitext._wikitext_c
pytestmark = pytest.mark.skipif(
    _wikitext_c is None, reason="_structcse_wikitext is not built (no C compiler at install time)"
)
LANGUAGES = ("en", "de", "fr", "es", "bg", "xx")


def before_inline(wikitext_: str) -> str:
    """The page as `wikitext_to_text` hands it to the inline pass."""
    text = wikitext._remove_comments(wikitext_)
    text = wikitext._escape_nowiki(text)
    text = wikitext._remove_extension_blocks(text)
    text = wikitext._remove_templates_and_tables(text)
    text = wikitext._remove_hidden_links(text)
    return wikitext._remove_line_markup(text)


def render_inline_both(text: str, language: str, monkeypatch) -> tuple[tuple, tuple]:
    """`_render_inline` with the C tokenizer, then with the regex alone."""
    with_c = wikitext._render_inline(text, language)
    with monkeypatch.context() as patch:
        patch.setattr(wikitext, "_wikitext_c", None)
        return with_c, wikitext._render_inline(text, language)


def c_split(text: str, links: list[Link], min_chars: int, max_chars: int, language: str):
    rules = SENTENCE_RULES.get(base_language(language), GENERIC_RULES)
    return _wikitext_c.split_sentences(
        text, sorted(links), min_chars, max_chars, wikitext._is_abbreviation, rules, rules.special_words,
        rules.capitalised_tails, Link,
    )


def python_split(text: str, links: list[Link], min_chars: int, max_chars: int, language: str):
    rules = SENTENCE_RULES.get(base_language(language), GENERIC_RULES)
    return wikitext._split_sentences(text, sorted(links), min_chars, max_chars, rules)


@pytest.mark.parametrize("sample", [ENWIKI, BGWIKI, TABLES], ids=["enwiki", "bgwiki", "tables"])
def test_same_output_as_python_on_real_pages(sample, monkeypatch):
    pages = [page for page in real_pages(*sample) if page.redirect is None]
    assert pages
    sentences = 0
    for page in pages:
        for language in ("en", "bg"):
            with_c, python = render_inline_both(before_inline(page.wikitext), language, monkeypatch)
            assert with_c == python, page.title
            text, targets = python
            python_text, python_links = wikitext._compact_whitespace(text, targets)
            c_text, c_links = _wikitext_c.compact_whitespace(text, targets, Link)
            assert (c_text, c_links) == (python_text, python_links), page.title
            assert all(type(link) is Link for link in c_links)
            for split_language in LANGUAGES:
                for min_chars, max_chars in ((20, 1000), (0, 10**9), (60, 200)):
                    expected = python_split(python_text, python_links, min_chars, max_chars, split_language)
                    assert c_split(python_text, python_links, min_chars, max_chars, split_language) == expected, (
                        page.title, split_language, min_chars, max_chars)
                    sentences += len(expected[0])
    assert sentences > 1000


# The characters the loops decide on: every kind of whitespace, the cut's punctuation,
# closing and opening quotes and brackets, guillemets with (no-break) spaces, link
# markers, and words of every abbreviation rule and shape, in several scripts.
PIECES = [
    " ", " ", " ", "\n", "\n\n", "\t", "\xa0", "\u202f", "\u2009", "\u3000", "\r", "\x1c", "\x85", ".", ".", "!",
    "?", "…", "...", '"', "'", "”", "’", "“", ")", "]", "(", "[", "«", "»", " »", "\xa0»", "„", "‘", "x", "word",
    "The", "A", "I", "J", "No", "no", "Dr", "Ibid", "War", "U.S", "e.g", "Inc", "5", "12", "IV", "Der", "am", "3",
    "т.е", "Той", "ок", "г", "É", "ß", "\U0001f600", "ca", "pp", "Jan", "Hello", "\u212a",
]


def random_text(rng: random.Random, pieces: int, markers: bool = False) -> str:
    choices = PIECES + ["\ufdd0", "\ufdd1"] if markers else PIECES
    return "".join(rng.choice(choices) for _ in range(pieces))


# Inline markup: every token kind and its broken forms, namespaces, trails in several scripts.
INLINE_PIECES = [
    "[", "[[", "]", "]]", "{", "}", "{{", "}}", "|", "'", "''", "'''", "&", "&amp;", "&#65;", "&#x41;", "&bogus", ";",
    "<", ">", "<b>", "</b>", "<br/>", "<ref>", "<bré>", "http://x.org", "https:", "//", "ftp:", "mailto:", " ", "  ",
    "\n", "\t", "\xa0", ":", "#", "_", "a", "foo", "Bar", "s", "é", "ß", "ж", "ä", "Ä", "ǆ", "İ", "1", "x y",
    "Категория:", "File:", "en:", "wikt:", "(x)", ",", ".",
]


def test_render_inline_same_as_python_on_random_text(monkeypatch):
    rng = random.Random(3)
    for _ in range(20_000):
        text = "".join(rng.choice(INLINE_PIECES) for _ in range(rng.randint(0, 30)))
        language = rng.choice(LANGUAGES)
        with_c, python = render_inline_both(text, language, monkeypatch)
        assert with_c == python, (text, language)


def test_compact_whitespace_same_as_python_on_random_text():
    rng = random.Random(7)
    for _ in range(20_000):
        text = random_text(rng, rng.randint(0, 40), markers=True)
        targets = [f"T{i}" for i in range(rng.randint(1, 6))]  # markers always come with targets
        assert _wikitext_c.compact_whitespace(text, targets, Link) == wikitext._compact_whitespace(text, targets), (
            text, targets)


def test_split_sentences_same_as_python_on_random_text():
    rng = random.Random(11)
    for _ in range(20_000):
        text = random_text(rng, rng.randint(0, 40))
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 2 * rng.randint(0, 4))))
        links = [Link(start, end, "X", text[start:end]) for start, end in zip(cuts[0::2], cuts[1::2])]
        language = rng.choice(LANGUAGES)
        min_chars, max_chars = rng.choice([(0, 10**9), (1, 1000), (5, 15)])
        assert c_split(text, links, min_chars, max_chars, language) == python_split(
            text, links, min_chars, max_chars, language), (text, links, language)


def test_public_functions_same_with_and_without_the_c_loops(monkeypatch):
    text = "Dr. Who met [[Ann]] in the U.S. The war ended.  It was  over."
    with_c = wikitext.wikitext_to_text(text)
    sentences_with_c = wikitext.split_sentences(*with_c, min_chars=1)
    monkeypatch.setattr(wikitext, "_wikitext_c", None)
    assert wikitext.wikitext_to_text(text) == with_c
    assert wikitext.split_sentences(*with_c, min_chars=1) == sentences_with_c
    assert [sentence for sentence, _ in sentences_with_c] == [
        "Dr. Who met Ann in the U.S.", "The war ended.", "It was over."]


def test_bad_links_are_a_clear_error():
    with pytest.raises(TypeError, match="link 0 is not a Link"):
        wikitext.split_sentences("One sentence here. Another one there.", [(1, 2)])
