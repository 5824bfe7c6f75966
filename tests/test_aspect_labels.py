"""AspectCSE aspect labels: the SPARQL route (against a real `oxigraph serve` on 127.0.0.1 and
loopback HTTP servers that misbehave) and the offline route (the demo world's `wikidata` set)
give the same table; backoff, cache, and the errors before anything is returned."""

from __future__ import annotations

import json
import shutil
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from setformat import schemas
from ingest.aspects import validate
from ingest.aspects.offline import aspect_labels_from_wikidata_set
from ingest.aspects.sparql import SparqlError, fetch_aspect_labels, retry_after_seconds

UA = "structcse-tests/0 (https://example.invalid/tests)"
AGENT = {"user_agent": UA}


@pytest.fixture(scope="module")
def oxigraph(demo_world, tmp_path_factory):
    """The demo world's Wikidata RDF in an `oxigraph serve-read-only` on 127.0.0.1: its /query URL."""
    from structcse.demo import WIKIDATA_DUMP
    from structcse.demo.rdf import serve_rdf, write_wikidata_rdf

    if shutil.which("oxigraph") is None:
        pytest.skip("the oxigraph binary is not installed (pip install 'structcse[test]')")
    world = tmp_path_factory.mktemp("rdf_world")  # the shared demo world stays as generate_demo_world wrote it
    (world / WIKIDATA_DUMP).parent.mkdir(parents=True)
    shutil.copy(demo_world.root / WIKIDATA_DUMP, world / WIKIDATA_DUMP)
    with serve_rdf(write_wikidata_rdf(world), tmp_path_factory.mktemp("oxigraph_store")) as url:
        yield url


@contextmanager
def http_server(answer):
    """A loopback HTTP server; ``answer(n, handler, body) -> (status, headers, bytes)`` for its n-th request.
    Yields (endpoint URL, the requests seen as (method, path, headers))."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def _handle(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.command, self.path, dict(self.headers)))
            status, headers, data = answer(len(seen), self, body)
            try:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left

        do_GET = do_POST = _handle

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/sparql", seen
    finally:
        server.shutdown()
        server.server_close()


def forward_to(url):
    def forward(handler, body):
        r = requests.post(url, data=body, timeout=30, headers={"Content-Type": handler.headers["Content-Type"],
                                                              "Accept": handler.headers.get("Accept", "*/*")})
        return r.status_code, {"Content-Type": r.headers.get("Content-Type", "")}, r.content
    return forward


def _expected(demo_world, kind: str, field: str, prop: str) -> dict:
    """{qid: (title, [value qid])} from the world's ground truth."""
    truth = demo_world.ground_truth()["entities"]
    return {e["qid"]: (e["title"], [e[field]]) for e in truth if e["kind"] == kind and field in e}


# ---------------------------------------------------------------- both routes, one table


@pytest.mark.parametrize("cls, properties", [("Q4830453", ("P17", "P452")), ("Q5", ("P27",))])
def test_sparql_and_offline_give_the_same_table(oxigraph, demo_sets, demo_world, cls, properties):
    online = fetch_aspect_labels(oxigraph, cls=cls, properties=properties, page_size=7, **AGENT)
    offline = aspect_labels_from_wikidata_set(demo_sets[0] / "wikidata", cls=cls, properties=properties)
    assert online.schema.equals(schemas.ASPECT_LABELS)
    assert online.equals(offline), (online.slice(0, 5).to_pylist(), offline.slice(0, 5).to_pylist())
    rows = online.to_pylist()
    assert [(r["qid"], r["property"]) for r in rows] == sorted(
        ((r["qid"], r["property"]) for r in rows), key=lambda k: (int(k[0][1:]), int(k[1][1:])))
    # against the world's ground truth: every entity of the kind with an article, its value, its label
    names = {e["qid"]: e["title"] for e in demo_world.ground_truth()["entities"]}
    kind, fields = ("company", {"P17": "country", "P452": "industry"}) if cls == "Q4830453" else (
        "person", {"P27": "citizenship"})
    for prop in properties:
        want = _expected(demo_world, kind, fields[prop], prop)
        got = {r["qid"]: (r["title"], r["label_qids"]) for r in rows if r["property"] == prop}
        assert got == want
        assert len(got) > 7 * 3  # page_size 7: keyset paging crossed several pages
        for r in rows:
            assert r["labels"] == [names[q] for q in r["label_qids"]] and r["wiki"] == "enwiki"


def test_subclasses_and_other_languages_agree(oxigraph, demo_sets):
    online = fetch_aspect_labels(oxigraph, properties=("P17",), subclasses=True, page_size=50, **AGENT)
    offline = aspect_labels_from_wikidata_set(demo_sets[0] / "wikidata", properties=("P17",), subclasses=True)
    assert online.equals(offline) and online.num_rows > 0


def test_offline_asks_for_a_reingest_when_the_set_lacks_what_is_asked(demo_sets):
    path = demo_sets[0] / "wikidata"
    with pytest.raises(ValueError, match=r"without properties \['P112'\].*re-ingest with --properties .*P112"):
        aspect_labels_from_wikidata_set(path, properties=("P17", "P112"))
    with pytest.raises(ValueError, match=r"re-ingest with --languages en fr"):
        aspect_labels_from_wikidata_set(path, language="fr")
    with pytest.raises(ValueError, match=r"no item is an instance of wd:Q999999 with an article in enwiki"):
        aspect_labels_from_wikidata_set(path, cls="Q999999")
    with pytest.raises(ValueError, match=r"has property P27 .*is P27 right"):
        aspect_labels_from_wikidata_set(path, properties=("P27",))


# ---------------------------------------------------------------- backoff, cache


def test_backoff_honours_retry_after(oxigraph):
    forward = forward_to(oxigraph)

    def answer(n, handler, body):
        if n <= 2:
            return 429, {"Retry-After": "1", "Content-Type": "text/plain"}, b"Too Many Requests"
        return forward(handler, body)

    reference = fetch_aspect_labels(oxigraph, properties=("P17",), **AGENT)
    with http_server(answer) as (endpoint, seen):
        started = time.monotonic()
        table = fetch_aspect_labels(endpoint, properties=("P17",), **AGENT)
        elapsed = time.monotonic() - started
    assert table.equals(reference)
    assert elapsed >= 2.0
    assert len(seen) == 3
    assert all(h.get("User-Agent") == UA for _, _, h in seen)


def test_a_timeout_is_retried(oxigraph):
    forward = forward_to(oxigraph)

    def answer(n, handler, body):
        if n == 1:
            time.sleep(2.0)  # past the client's 1 s timeout
        return forward(handler, body)

    with http_server(answer) as (endpoint, seen):
        table = fetch_aspect_labels(endpoint, properties=("P452",), timeout=1, backoff_base=0.01, **AGENT)
    assert len(seen) == 2 and table.num_rows > 0


def test_always_503_is_an_error_naming_endpoint_and_page_without_the_key(project_log):
    def answer(n, handler, body):
        return 503, {"Content-Type": "text/plain"}, b"Service Unavailable"

    with http_server(answer) as (endpoint, seen), pytest.raises(SparqlError) as err:
        fetch_aspect_labels(endpoint + "?key=s3cret", properties=("P17",), max_retries=2, backoff_base=0.01,
                            backoff_cap=0.02, user_agent=UA)
    message = str(err.value)
    logs = project_log.lines
    assert len(seen) == 3  # the first try and max_retries=2 retries
    assert endpoint in message and "page 1" in message and "503" in message and "wdt:P17" in message
    assert "s3cret" not in message and not any("s3cret" in line for line in logs) and len(logs) == 2


def test_cache_answers_a_rerun_without_requests(oxigraph, tmp_path):
    with http_server(lambda n, h, b: forward_to(oxigraph)(h, b)) as (endpoint, seen):
        endpoint += "?key=s3cret"
        first = fetch_aspect_labels(endpoint, page_size=25, cache_dir=tmp_path, **AGENT)
        requests_made = len(seen)
        second = fetch_aspect_labels(endpoint, page_size=25, cache_dir=tmp_path, **AGENT)
    assert requests_made >= 4 and len(seen) == requests_made
    assert first.equals(second) and first.num_rows > 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == requests_made and all(len(f) == len("0" * 64 + ".json") for f in files)
    assert all("s3cret" not in f and "127.0.0.1" not in f for f in files)
    json.loads((tmp_path / files[0]).read_text())  # JSON, not pickle


# ---------------------------------------------------------------- clear errors


@pytest.mark.parametrize("content_type, body", [
    ("text/html", b"<html><head><title>Sign in</title></head><body>Please log in</body></html>"),
    ("application/sparql-results+json", b'{"head": {"vars": ["item"]}, "results": {"bindings": [{"item": '),
])
def test_an_answer_that_is_not_sparql_json_is_a_clear_error(content_type, body):
    with (http_server(lambda n, h, b: (200, {"Content-Type": content_type}, body)) as (endpoint, seen),
          pytest.raises(SparqlError, match="did not answer SPARQL JSON") as err):
        fetch_aspect_labels(endpoint, **AGENT)
    assert body.decode()[:40] in str(err.value) and len(seen) == 1


def test_values_are_checked_before_any_request():
    with http_server(lambda n, h, b: (500, {}, b"")) as (endpoint, seen):
        with pytest.raises(ValueError) as err:
            fetch_aspect_labels(endpoint, properties=("P17 } ; DROP",), **AGENT)
        assert str(err.value) == ("aspects.properties: 'P17 } ; DROP' is not a Wikidata property id "
                                  "(P followed by digits)")
        for bad in ({"cls": "wd:Q5"}, {"wiki": "en.wikipedia"}, {"language": 'en"'}, {"user_agent": " "}):
            with pytest.raises(ValueError):
                fetch_aspect_labels(endpoint, **{**AGENT, **bad})
    assert seen == []


def test_unknown_class_and_property_are_clear_errors(oxigraph):
    with pytest.raises(SparqlError, match=r"no item is an instance of wd:Q999999 with an article in enwiki"):
        fetch_aspect_labels(oxigraph, cls="Q999999", **AGENT)
    with pytest.raises(SparqlError, match=r"has property P999999 \(the endpoint knows nothing about wd:P999999\)"):
        fetch_aspect_labels(oxigraph, properties=("P17", "P999999"), **AGENT)
    with pytest.raises(SparqlError, match=r"no item of class wd:Q4830453 with an article in enwiki has property "
                                          r"P27; is P27 right\?"):
        fetch_aspect_labels(oxigraph, properties=("P27",), **AGENT)


# ---------------------------------------------------------------- small pieces


def test_validation_and_sites():
    assert validate.check_qid("Q42") == "Q42" and validate.check_language("zh-hans") == "zh-hans"
    for bad in ("Q0", "q42", "Q42 ", "Q4830453}"):
        with pytest.raises(ValueError, match="aspects.class"):
            validate.check_qid(bad)
    assert validate.wiki_site("enwiki") == "https://en.wikipedia.org/"
    assert validate.wiki_site("zh_yuewiki") == "https://zh-yue.wikipedia.org/"
    assert validate.wiki_site("commonswiki") == "https://commons.wikimedia.org/"
    with pytest.raises(ValueError, match="aspects.wiki"):
        validate.wiki_site("https://evil/")


def test_retry_after_parses_seconds_and_http_dates():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_multi_valued_properties_are_sets_and_pages_never_split_an_item(oxigraph, demo_world):
    whole = fetch_aspect_labels(oxigraph, cls="Q6256", properties=("P47", "P31"), page_size=1000, **AGENT)
    paged = fetch_aspect_labels(oxigraph, cls="Q6256", properties=("P47", "P31"), page_size=2, **AGENT)
    assert paged.equals(whole)
    rows = whole.to_pylist()
    borders = [r for r in rows if r["property"] == "P47"]
    assert any(len(r["label_qids"]) > 1 for r in borders)
    for r in borders:
        assert r["label_qids"] == sorted(set(r["label_qids"]), key=lambda q: int(q[1:]))
    # the company with a deprecated P31 "country" is not a country (truthy statements only)
    countries = {e["qid"] for e in demo_world.ground_truth()["entities"] if e["kind"] == "country"}
    assert {r["qid"] for r in rows} == countries
    assert all(r["labels"] == ["country"] for r in rows if r["property"] == "P31")
