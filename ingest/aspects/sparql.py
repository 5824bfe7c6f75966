"""AspectCSE's aspect labels from a SPARQL endpoint (the Wikidata Query Service by default).

``fetch_aspect_labels`` asks, per property, for the items of a class (``wdt:P31``,
or ``wdt:P31/wdt:P279*``) that have an article in a wiki and a value of the
property, with the article's title and the values' labels in one language
(docs/methods.md §5; ../shared/docs/ray.md §7 for the service's limits):

- paging is by keyset over *items*: a subquery selects the next ``page_size``
  distinct items whose IRI sorts after the last one seen, then the outer query
  fetches all their values, so a page never cuts through an item (no OFFSET,
  which the service re-evaluates from the start for every page);
- one request at a time through SPARQLWrapper (POST, JSON results), with the
  User-Agent the Wikimedia policy requires; HTTP 429/502/503/504, timeouts and
  dropped connections are retried with exponential backoff (base 1 s, cap
  60 s) that honours ``Retry-After`` (seconds or an HTTP date); after
  ``max_retries`` a ``SparqlError`` names the endpoint, the page and the query.
  Never a silently short result;
- each response is cached on disk as JSON under the sha256 of (endpoint,
  query): a rerun reads the cache and sends nothing. The endpoint URL may hold
  a key, so neither a file name nor a log line nor an error shows more of it
  than scheme, host and path;
- an endpoint that answers something other than SPARQL JSON, a property no
  item of the class has and a class without items are errors before anything
  is returned.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import logging
import time
import urllib.error
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
from SPARQLWrapper import JSON, POST, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import SPARQLWrapperException

from infra.version import __version__
from ingest.aspects.table import aspect_table
from ingest.aspects.validate import (
    check_language,
    check_properties,
    check_qid,
    check_wiki,
    wiki_site,
)

log = logging.getLogger(__name__)
WDQS = "https://query.wikidata.org/sparql"
ENTITY = "http://www.wikidata.org/entity/"
GENID = "http://www.wikidata.org/.well-known/genid/"  # somevalue snaks in the WDQS RDF
RETRY_STATUS = (429, 502, 503, 504)
RETRY_AFTER_MAX = 3600.0  # seconds: a Retry-After beyond this is an endpoint bug, not a wait
PREFIXES = """PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX schema: <http://schema.org/>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
"""


DEFAULT_USER_AGENT = (f"structcse/{__version__} (aspect labels for AspectCSE; set aspects.user_agent to a contact "
                      "URL or e-mail, as the Wikimedia User-Agent policy asks)")


class SparqlError(RuntimeError):
    """The endpoint failed, answered something that is not SPARQL JSON, or the query found nothing."""


def redact(endpoint: str) -> str:
    """``endpoint`` as it may be shown: scheme, host, port and path; no user info, query or fragment."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    hidden = " (query string hidden)" if parts.query else ""
    return f"{parts.scheme}://{host}{parts.path}{hidden}"


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header as seconds to wait (it is a number of seconds or an HTTP date); None if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        return min(max(0.0, float(value)), RETRY_AFTER_MAX)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return min(max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds()), RETRY_AFTER_MAX)


def _literal(text: str) -> str:
    """A SPARQL string literal of ``text``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _member(cls: str, subclasses: bool) -> str:
    return f"wdt:P31/wdt:P279* wd:{cls}" if subclasses else f"wdt:P31 wd:{cls}"


def page_query(cls: str, pid: str, site: str, language: str, subclasses: bool, after: str | None,
               page_size: int) -> str:
    """The query of one page: the next ``page_size`` items (by IRI) after ``after`` and all their values."""
    after_filter = f"\n      FILTER(STR(?item) > {_literal(after)})" if after else ""
    return PREFIXES + f"""SELECT ?item ?title ?value ?valueLabel WHERE {{
  {{
    SELECT DISTINCT ?item WHERE {{
      ?item {_member(cls, subclasses)} ;
            wdt:{pid} ?anyValue .
      ?anyArticle schema:about ?item ;
                  schema:isPartOf <{site}> .{after_filter}
    }}
    ORDER BY STR(?item)
    LIMIT {int(page_size)}
  }}
  ?item wdt:{pid} ?value .
  OPTIONAL {{ ?article schema:about ?item ; schema:isPartOf <{site}> ; schema:name ?title . }}
  OPTIONAL {{ ?value rdfs:label ?valueLabel . FILTER(LANG(?valueLabel) = {_literal(language)}) }}
}}"""


class _Client:
    """One request at a time through SPARQLWrapper, with retries and the on-disk cache."""

    def __init__(self, endpoint: str, user_agent: str, timeout: float, max_retries: int, backoff_base: float,
                 backoff_cap: float, cache_dir):
        self.endpoint, self.shown = endpoint, redact(endpoint)
        self.max_retries, self.backoff_base, self.backoff_cap = max_retries, backoff_base, backoff_cap
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.wrapper = SPARQLWrapper(endpoint, agent=user_agent)
        self.wrapper.setReturnFormat(JSON)
        self.wrapper.setMethod(POST)
        self.wrapper.setTimeout(int(max(1, timeout)))
        self.requests = 0

    def _cache_path(self, query: str) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(f"{self.endpoint}\n{query}".encode()).hexdigest()
        return self.cache_dir / f"{key}.json"

    def run(self, query: str, where: str, key: str = "results") -> dict:
        """The endpoint's JSON answer to ``query`` (``key`` must be in it: ``results`` or ``boolean``)."""
        path = self._cache_path(query)
        if path is not None and path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        answer = self._fetch(query, where)
        if key not in answer or (key == "results" and not isinstance(answer[key].get("bindings"), list)):
            raise SparqlError(f"endpoint {self.shown} did not answer SPARQL JSON for {where}: no {key!r} in "
                              f"{json.dumps(answer)[:200]!r}")
        if path is not None:
            from infra.publish import write_text_atomic

            write_text_atomic(path, json.dumps(answer))
        return answer

    def _fail(self, what: str, where: str, query: str) -> SparqlError:
        return SparqlError(f"SPARQL endpoint {self.shown}: {what} at {where}; query:\n{query}")

    def _fetch(self, query: str, where: str) -> dict:
        self.wrapper.setQuery(query)
        for attempt in range(self.max_retries + 1):
            wait = None
            try:
                self.requests += 1
                result = self.wrapper.query()
                body = result.response.read()
                content_type = result.response.headers.get("Content-Type", "?")
                break
            except urllib.error.HTTPError as e:
                if e.code not in RETRY_STATUS:
                    raise self._fail(f"HTTP {e.code} {e.reason}", where, query) from None
                problem = f"HTTP {e.code}"
                wait = retry_after_seconds(e.headers.get("Retry-After") if e.headers else None)
            except SPARQLWrapperException as e:  # 400, 401, 404, 414, 500
                raise self._fail(f"{type(e).__name__}: {str(e)[:500]}", where, query) from None
            except (TimeoutError, http.client.RemoteDisconnected, ConnectionResetError) as e:
                problem = f"{type(e).__name__}"
            except urllib.error.URLError as e:
                if not isinstance(e.reason, (TimeoutError, ConnectionResetError)):
                    raise self._fail(f"cannot reach the endpoint ({e.reason})", where, query) from None
                problem = f"{type(e.reason).__name__}"
            if attempt == self.max_retries:
                raise self._fail(f"{problem}, still failing after {self.max_retries} retries", where, query)
            if wait is None:
                wait = min(self.backoff_cap, self.backoff_base * 2 ** attempt)
            log.warning(f"[aspects] {self.shown}: {problem} at {where}; retry {attempt + 1}/{self.max_retries} "
                        f"in {wait:.1f} s")
            time.sleep(wait)
        text = body.decode("utf-8", errors="replace")
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise SparqlError(f"endpoint {self.shown} did not answer SPARQL JSON at {where} (Content-Type "
                              f"{content_type}); the answer begins: {text[:200]!r}")
        return answer


def _value_id(binding: dict) -> str | None:
    """An item value's QID, another value's text; None for somevalue (blank nodes, genid IRIs)."""
    kind, value = binding.get("type"), binding.get("value", "")
    if kind == "bnode" or (kind == "uri" and value.startswith(GENID)):
        return None
    if kind == "uri" and value.startswith(ENTITY):
        return value[len(ENTITY):]
    return value


def fetch_aspect_labels(endpoint: str = WDQS, *, cls: str = "Q4830453", properties=("P17", "P452"),
                        wiki: str = "enwiki", language: str = "en", subclasses: bool = False,
                        page_size: int = 10000, user_agent: str = DEFAULT_USER_AGENT, cache_dir=None,
                        max_retries: int = 6, timeout: float = 60, backoff_base: float = 1.0,
                        backoff_cap: float = 60.0) -> pa.Table:
    """The ``schemas.ASPECT_LABELS`` table of the items of ``cls`` with an article in ``wiki``, one row
    per (item, property) with at least one value, from the SPARQL ``endpoint`` (see the module doc)."""
    cls = check_qid(cls, "aspects.class")
    properties = check_properties(properties, "aspects.properties")
    wiki, language = check_wiki(wiki, "aspects.wiki"), check_language(language, "aspects.language")
    if not isinstance(user_agent, str) or not user_agent.strip():
        raise ValueError("aspects.user_agent: a User-Agent is required (the Wikimedia User-Agent policy); "
                         "give a name and a contact URL or e-mail")
    if not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"aspects.page_size: {page_size!r} is not a positive integer")
    if not isinstance(endpoint, str) or urlsplit(endpoint).scheme not in ("http", "https"):
        raise ValueError("aspects.endpoint: not an http(s) URL")
    site = wiki_site(wiki)
    client = _Client(endpoint, user_agent.strip(), timeout, max_retries, backoff_base, backoff_cap, cache_dir)
    titles: dict[str, str] = {}
    values: dict[tuple[str, str], dict[str, str]] = {}
    for pid in properties:
        after, page, items_total = None, 0, 0
        while True:
            page += 1
            where = f"property {pid} page {page} (after {after[len(ENTITY):] if after and after.startswith(ENTITY) else after or 'the start'})"
            query = page_query(cls, pid, site, language, subclasses, after, page_size)
            bindings = client.run(query, where)["results"]["bindings"]
            items = _read_page(bindings, pid, titles, values, client, where)
            if len(items) > page_size:
                raise SparqlError(f"endpoint {client.shown} returned {len(items)} items at {where}, more than the "
                                  f"page size {page_size}: it ignored LIMIT")
            items_total += len(items)
            if len(items) < page_size:
                break
            last = max(items)
            if after is not None and last <= after:
                raise SparqlError(f"endpoint {client.shown}: keyset paging did not advance at {where}")
            after = last
        log.info(f"[aspects] {pid}: {items_total} items of wd:{cls} with an {wiki} article in {page} page(s)")
        if items_total == 0:
            _explain_empty(client, cls, pid, site, wiki, subclasses)
    missing = sorted({qid for qid, _ in values} - set(titles))
    if missing:
        raise SparqlError(f"endpoint {client.shown}: no schema:name for the {wiki} article of {len(missing)} "
                          f"item(s), e.g. {missing[:5]}")
    return aspect_table(wiki, titles, values)


def _read_page(bindings: list[dict], pid: str, titles: dict[str, str], values: dict, client: "_Client",
               where: str) -> set[str]:
    """One page of ``pid``'s rows into ``titles`` (QID -> article title) and ``values`` ((QID, pid) -> {value
    id: its label, the least of several}); returns the page's items."""
    items = set()
    for b in bindings:
        item = b.get("item", {}).get("value")
        if not item:
            raise SparqlError(f"endpoint {client.shown}: a row without ?item at {where}: {json.dumps(b)[:200]}")
        items.add(item)
        qid = item.removeprefix(ENTITY)
        if "title" in b:
            titles.setdefault(qid, b["title"]["value"])
        vid = _value_id(b.get("value", {}))
        if vid is None:
            continue
        label = b["valueLabel"]["value"] if "valueLabel" in b else vid
        labels = values.setdefault((qid, pid), {})
        labels[vid] = min(labels.get(vid, label), label)
    return items


def _explain_empty(client: _Client, cls: str, pid: str, site: str, wiki: str, subclasses: bool) -> None:
    """Raise the error that says why a property found no item: the class, or the property."""
    member = _member(cls, subclasses)
    ask = PREFIXES + f"ASK {{ ?item {member} . ?article schema:about ?item ; schema:isPartOf <{site}> . }}"
    if not client.run(ask, f"the check of class wd:{cls}", key="boolean")["boolean"]:
        kind = "an instance (or of a subclass)" if subclasses else "an instance"
        raise SparqlError(f"no item is {kind} of wd:{cls} with an article in {wiki} at {client.shown}; "
                          f"is aspects.class {cls} right?")
    exists = client.run(PREFIXES + f"ASK {{ wd:{pid} ?p ?o }}", f"the check of property {pid}", key="boolean")
    known = "" if exists["boolean"] else f" (the endpoint knows nothing about wd:{pid})"
    raise SparqlError(f"no item of class wd:{cls} with an article in {wiki} has property {pid}{known}; "
                      f"is {pid} right?")
