"""BabelNet as a ``SemanticNetwork``: the documented HTTP API (https://babelnet.org/guide), cached on disk.

Three GET endpoints, JSON out:

- ``getSynsetIds?lemma=&searchLang=`` -> ``[{"id": "bn:00015267n", "pos": "NOUN", "source": ...}, ...]``,
  the word's synsets in BabelNet's order (``rank``);
- ``getSynset?id=&targetLang=`` -> ``{"senses": [{"properties": {"fullLemma", "simpleLemma",
  "language", ...}}], "glosses": [{"source": "WN", "language": "EN", "gloss": ...}],
  "synsetType": "NAMED_ENTITY" | "CONCEPT", "categories": [{"category", "language"}],
  "domains": {"BIOLOGY": 0.8, ...}}``;
- ``getOutgoingEdges?id=`` -> ``[{"target": "bn:...", "language": ..., "pointer": {"fSymbol": "@",
  "name": "Hypernym", "shortName": "is-a", "relationGroup": "HYPERNYM" | "HYPONYM" | "MERONYM" |
  "HOLONYM" | "OTHER"}}, ...]``.

The API key is read from the environment variable ``key_env`` at each request and
sent as the ``key`` query parameter; it is kept out of the object (so a pickled
instance shipped to a Ray worker carries none), of the cache (a file per request,
named by the sha256 of the endpoint and the other parameters, holding plain JSON),
and of every message (URLs are printed with ``key=***``). Requests are retried on
429, 5xx and connection errors with exponential backoff (``Retry-After`` honoured),
up to ``max_retries``; the daily-limit answer is an error of its own
(``BabelNetLimit``), and is never cached.

Relations come from the outgoing edges of ``first``: WordNet pointer symbols
(``fSymbol``) first, then the pointer's ``name``, then its ``relationGroup``
(a bare MERONYM/HOLONYM, e.g. from Wikidata "part of", counts as ``part_*``).
Hypernyms are followed ``max_depth`` steps (3 by default: each step costs requests).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from urllib.parse import urlencode, urlparse

import requests

from ingest.semnet.network import RELATIONS, Sense

POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
SYMBOLS = {  # WordNet pointer symbols, as BabelNet carries them on WordNet-derived edges
    "@": "hypernym", "@i": "hypernym", "~": "hyponym", "~i": "hyponym",
    "#m": "member_holonym", "#s": "substance_holonym", "#p": "part_holonym",
    "%m": "member_meronym", "%s": "substance_meronym", "%p": "part_meronym",
    "!": "antonym", "&": "similar", "^": "similar", "$": "similar",
}
GROUPS = {"HYPERNYM": "hypernym", "HYPONYM": "hyponym", "MERONYM": "part_meronym", "HOLONYM": "part_holonym"}


class BabelNetError(RuntimeError):
    """A request BabelNet did not answer usefully (after retries), or answered with an error message."""


class BabelNetLimit(BabelNetError):
    """BabelNet's daily request limit for the key is reached."""


def edge_relation(pointer: dict) -> str | None:
    """The ``RELATIONS`` name of an edge's pointer, or None for relations DSBATS does not use."""
    symbol = pointer.get("fSymbol") or ""
    if symbol in SYMBOLS:
        return SYMBOLS[symbol]
    name = (pointer.get("name") or "").lower().replace("_", " ")
    for kind in ("member", "substance", "part"):
        for role in ("meronym", "holonym"):
            if kind in name and role in name:
                return f"{kind}_{role}"
    for word, relation in (("antonym", "antonym"), ("similar", "similar"), ("also see", "similar"),
                           ("verb group", "similar"), ("hypernym", "hypernym"), ("hyponym", "hyponym")):
        if word in name:
            return relation
    return GROUPS.get(pointer.get("relationGroup") or "")


class BabelNet:
    """BabelNet's HTTP API behind ``SemanticNetwork``; one instance per process (Ray worker)."""

    def __init__(self, url: str = "https://babelnet.io/v9", key_env: str = "BABELNET_KEY", cache: str | None = None,
                 language: str = "EN", max_retries: int = 5, backoff: float = 1.0, timeout: float = 30,
                 session: requests.Session | None = None, max_depth: int = 3):
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"BabelNet url {url!r}: expected an http(s):// address")
        if not os.environ.get(key_env):
            raise BabelNetError(f"BabelNet needs an API key in the environment variable {key_env}, which is unset")
        self.url, self.key_env, self.language = url.rstrip("/"), key_env, language.upper()
        self.cache = Path(cache).expanduser() if cache else None
        self.max_retries, self.backoff, self.timeout, self.max_depth = max_retries, backoff, timeout, max_depth
        self.session = session or requests.Session()
        self.name = "babelnet-" + (parsed.path.strip("/").split("/")[-1] or "api")
        self._lock = threading.Lock()
        self._memo: dict[str, object] = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_lock"], state["session"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock(), session=requests.Session())

    # -- requests ---------------------------------------------------------------------------------------------
    def get(self, endpoint: str, **params) -> object:
        """The JSON answer of ``endpoint`` for ``params`` (the key added here): memory, then disk, then HTTP."""
        digest = hashlib.sha256(json.dumps([endpoint, sorted(params.items())]).encode()).hexdigest()
        with self._lock:
            if digest in self._memo:
                return self._memo[digest]
        path = self.cache / f"{digest}.json" if self.cache else None
        if path is not None and path.is_file():
            answer = json.loads(path.read_text(encoding="utf-8"))["response"]
        else:
            answer = self._fetch(endpoint, params)
            if path is not None:
                from infra.publish import write_text_atomic

                write_text_atomic(path, json.dumps({"endpoint": endpoint, "params": params, "response": answer}))
        with self._lock:
            self._memo[digest] = answer
        return answer

    def _fetch(self, endpoint: str, params: dict) -> object:
        shown = f"{self.url}/{endpoint}?{urlencode(sorted(params.items()))}&key=***"
        key = os.environ.get(self.key_env)
        if not key:
            raise BabelNetError(f"BabelNet needs an API key in the environment variable {self.key_env}, which is unset")
        problem = ""
        for attempt in range(self.max_retries + 1):
            wait = self.backoff * 2**attempt
            try:
                response = self.session.get(f"{self.url}/{endpoint}", params={**params, "key": key},
                                            timeout=self.timeout, headers={"Accept-Encoding": "gzip"})
            except requests.RequestException as exc:
                problem = type(exc).__name__ + ": " + str(exc).replace(key, "***")
            else:
                if response.status_code == 429 or response.status_code >= 500:
                    problem = f"HTTP {response.status_code}"
                    wait = _retry_after(response.headers.get("Retry-After"), wait)
                else:
                    return self._answer(response, shown, key)
            if attempt < self.max_retries:
                time.sleep(wait)
        raise BabelNetError(f"BabelNet {shown}: gave up after {self.max_retries + 1} tries ({problem})")

    def _answer(self, response: requests.Response, shown: str, key: str) -> object:
        try:
            answer = response.json()
        except ValueError:
            answer = None
        message = answer.get("message") if isinstance(answer, dict) else None
        if message is not None:
            message = str(message).replace(key, "***")
            error = BabelNetLimit if "limit" in message.lower() else BabelNetError
            raise error(f"BabelNet {shown}: {message}")
        if response.status_code != 200 or answer is None:
            raise BabelNetError(f"BabelNet {shown}: HTTP {response.status_code}, not a JSON answer")
        return answer

    # -- SemanticNetwork --------------------------------------------------------------------------------------
    def senses(self, word: str) -> list[Sense]:
        """The word's synsets in BabelNet's order, each mapped to a ``Sense`` (one ``getSynset`` and one
        ``getOutgoingEdges`` request per synset, cached)."""
        word = word.strip().lower().replace(" ", "_")
        ids = self.get("getSynsetIds", lemma=word.replace("_", " "), searchLang=self.language)
        out = []
        for rank, entry in enumerate(ids or []):
            synset = self.get("getSynset", id=entry["id"], targetLang=self.language)
            out.append(self._sense(word, rank, entry, synset))
        return out

    def _sense(self, word: str, rank: int, entry: dict, synset: dict) -> Sense:
        lemmas = []
        for sense in synset.get("senses") or []:
            props = sense.get("properties", sense)
            if (props.get("language") or self.language).upper() != self.language:
                continue
            lemma = (props.get("fullLemma") or props.get("simpleLemma") or props.get("lemma") or "").replace(" ", "_")
            if lemma and lemma not in lemmas:
                lemmas.append(lemma)
        matching = [lemma for lemma in lemmas if lemma.lower() == word]
        glosses = [g for g in synset.get("glosses") or [] if (g.get("language") or self.language).upper()
                   == self.language]
        gloss = next((g for g in glosses if g.get("source") == "WN"), glosses[0] if glosses else {})
        categories = [c.get("category", "") for c in synset.get("categories") or []]
        domains = synset.get("domains") or {}
        group = categories[0] if categories else (max(domains, key=domains.get) if domains else "")
        return Sense(
            id=entry["id"], word=word, pos=POS.get(entry.get("pos", ""), str(entry.get("pos", "")).lower()),
            definition=gloss.get("gloss", ""), lemmas=tuple(lemmas), rank=rank, group=group,
            named_entity=synset.get("synsetType") == "NAMED_ENTITY",
            capitalised=bool(matching) and all(lemma != lemma.lower() for lemma in matching),
            degree=len(self._edges(entry["id"])),
        )

    def _edges(self, synset_id: str) -> list[dict]:
        return list(self.get("getOutgoingEdges", id=synset_id) or [])

    def _targets(self, synset_id: str, relation: str) -> set[str]:
        return {e["target"] for e in self._edges(synset_id) if edge_relation(e.get("pointer") or {}) == relation}

    def _ancestors(self, synset_id: str) -> set[str]:
        seen, frontier = set(), {synset_id}
        for _ in range(self.max_depth):
            frontier = {t for s in frontier for t in self._targets(s, "hypernym")} - seen
            if not frontier:
                break
            seen |= frontier
        return seen

    def related(self, first: Sense, second: Sense, relation: str) -> bool:
        """Whether ``second`` is a ``relation`` of ``first``, from ``first``'s outgoing edges (module doc)."""
        if relation not in RELATIONS:
            raise ValueError(f"relation {relation!r}: expected one of {RELATIONS}")
        a, b = first.id, second.id
        if relation == "hypernym":
            return b in self._ancestors(a)
        if relation == "hyponym":
            return b in self._targets(a, "hyponym") or a in self._ancestors(b)
        if relation == "similar":
            if a == b:
                return False
            return b in self._targets(a, "similar") or bool(self._targets(a, "hypernym") & self._targets(b, "hypernym"))
        if relation == "antonym":
            heads = self._targets(a, "similar") | {a}
            opposite = {t for h in heads for t in self._targets(h, "antonym")}
            return bool(opposite & (self._targets(b, "similar") | {b}))
        return b in self._targets(a, relation)


def _retry_after(value: str | None, default: float) -> float:
    """Seconds from a ``Retry-After`` header (delta-seconds form), else ``default``."""
    try:
        return max(0.0, float(value)) if value is not None else default
    except ValueError:
        return default
