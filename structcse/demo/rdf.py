"""The demo world's Wikidata as N-Triples, in the layout of the Wikidata Query Service's RDF.

``write_wikidata_rdf(world_dir)`` reads the world's Wikidata JSON dump and
writes ``wikidata/wikidata-<date>-truthy.nt`` beside it, for a SPARQL endpoint
(``oxigraph serve``) the aspect label route queries in tests:

- ``wdt:`` truthy statements of every item-valued property (P31, P17, P452,
  P27, P279, …): per property the preferred statements if there are any,
  else the normal ones, never deprecated ones; a ``somevalue`` snak is a
  ``.well-known/genid`` IRI, a ``novalue`` one ``a wdno:P…``, as in WDQS;
- ``rdfs:label`` per language, for items and properties;
- sitelinks the WDQS way: ``<https://en.wikipedia.org/wiki/Title_with_underscores>``
  (percent-encoded) ``schema:about`` the item, ``schema:isPartOf
  <https://en.wikipedia.org/>``, ``schema:name "Title"@en``.

``generate_demo_world`` does not call it: the world's other files are unchanged.
``serve_rdf`` serves such a file with ``oxigraph serve-read-only`` on 127.0.0.1
(the tests' and ``bench/aspects.py``'s endpoint). Only the standard library is
imported.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from structcse.demo import WIKIDATA_DUMP
from structcse.demo.world import DUMP_DATE

WIKIDATA_RDF = f"wikidata/wikidata-{DUMP_DATE}-truthy.nt"
WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
WDNO = "http://www.wikidata.org/prop/novalue/"
GENID = "http://www.wikidata.org/.well-known/genid/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SCHEMA = "http://schema.org/"
WIKIBASE_PROPERTY = "http://wikiba.se/ontology#Property"
TITLE_SAFE = ";@$!*(),/~:"  # what MediaWiki's wfUrlencode leaves as is


def _iri(iri: str) -> str:
    return f"<{iri}>"


def _literal(text: str, language: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"@{language}'


def site_of(wiki: str) -> str:
    """``enwiki`` -> ``https://en.wikipedia.org/`` (the demo world has only Wikipedias)."""
    return f"https://{wiki.removesuffix('wiki').replace('_', '-')}.wikipedia.org/"


def article_iri(wiki: str, title: str) -> str:
    return site_of(wiki) + "wiki/" + quote(title.replace(" ", "_"), safe=TITLE_SAFE)


def _truthy(statements: list[dict]) -> list[dict]:
    preferred = [s for s in statements if s.get("rank") == "preferred"]
    return preferred or [s for s in statements if s.get("rank") == "normal"]


def entity_triples(entity: dict) -> list[str]:
    """The N-Triples lines of one entity of the JSON dump."""
    subject = _iri(WD + entity["id"])
    lines = []
    if entity.get("type") == "property":
        lines.append(f"{subject} {_iri(RDF_TYPE)} {_iri(WIKIBASE_PROPERTY)} .")
    for language, term in sorted((entity.get("labels") or {}).items()):
        lines.append(f"{subject} {_iri(RDFS_LABEL)} {_literal(term['value'], language)} .")
    for prop, statements in sorted((entity.get("claims") or {}).items(), key=lambda kv: int(kv[0][1:])):
        for statement in _truthy(statements):
            snak = statement["mainsnak"]
            if snak.get("datatype") != "wikibase-item":
                continue
            if snak["snaktype"] == "value":
                obj = _iri(WD + snak["datavalue"]["value"]["id"])
            elif snak["snaktype"] == "somevalue":
                obj = _iri(GENID + hashlib.md5(statement["id"].encode()).hexdigest())
            else:  # novalue
                lines.append(f"{subject} {_iri(RDF_TYPE)} {_iri(WDNO + prop)} .")
                continue
            lines.append(f"{subject} {_iri(WDT + prop)} {obj} .")
    for wiki, link in sorted((entity.get("sitelinks") or {}).items()):
        article = _iri(article_iri(wiki, link["title"]))
        language = wiki.removesuffix("wiki").replace("_", "-")
        lines += [f"{article} {_iri(SCHEMA + 'about')} {subject} .",
                  f"{article} {_iri(SCHEMA + 'isPartOf')} {_iri(site_of(wiki))} .",
                  f"{article} {_iri(SCHEMA + 'name')} {_literal(link['title'], language)} ."]
    return lines


def read_wikidata_dump(path: Path) -> list[dict]:
    """The entities of a demo Wikidata JSON dump (``.json.bz2``, one entity per line inside ``[`` … ``]``)."""
    entities = []
    for line in bz2.decompress(Path(path).read_bytes()).decode("utf-8").splitlines():
        line = line.strip().rstrip(",")
        if line not in ("[", "]", ""):
            entities.append(json.loads(line))
    return entities


def write_wikidata_rdf(world_dir) -> Path:
    """Write the world's Wikidata as N-Triples (``WIKIDATA_RDF`` under ``world_dir``); returns its path."""
    root = Path(world_dir)
    out = root / WIKIDATA_RDF
    lines = [line for entity in read_wikidata_dump(root / WIKIDATA_DUMP) for line in entity_triples(entity)]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


@contextmanager
def serve_rdf(nt: Path, store: Path, *, timeout: float = 30.0):
    """``oxigraph serve-read-only`` on a free 127.0.0.1 port over ``nt`` loaded into a store at
    ``store`` (PyPI ``oxigraph``); yields the SPARQL query URL and stops the server on exit, its
    output in ``store``'s ``.log`` beside it. ``FileNotFoundError`` when the ``oxigraph`` binary is
    missing, ``RuntimeError`` when the server exits or does not answer within ``timeout`` seconds."""
    exe = shutil.which("oxigraph")
    if exe is None:
        raise FileNotFoundError("the oxigraph binary is not installed (pip install 'structcse[test]')")
    subprocess.run([exe, "load", "--location", str(store), "--file", str(nt)], check=True, capture_output=True,
                   timeout=300)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/query"
    with open(store.with_suffix(".log"), "wb") as log:
        proc = subprocess.Popen([exe, "serve-read-only", "--location", str(store), "--bind", f"127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"oxigraph serve exited with {proc.returncode} (log: {log.name})")
                try:
                    with urllib.request.urlopen(f"{url}?{urllib.parse.urlencode({'query': 'ASK {}'})}", timeout=2):
                        break
                except OSError:  # not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"oxigraph serve did not answer within {timeout:.0f} s (log: {log.name})")
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
