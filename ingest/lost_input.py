"""What an ingest job lost, read from its manifest: the one-line reasons its exit status is not 0.

A job that cannot account for its input (pages or Wikidata lines written + dropped with a reason ≠
what the input held; a source cut short), or that wrote an empty set from input that was not empty,
has lost data somewhere; its command exits 1 with these lines and the manifest's path, unless the
user accepts the loss (``--allow-loss``). Counted drops (redirects, bad JSON lines, corrupt streams
quarantined with their offsets) are not lost: the manifest says where each went.
"""

from __future__ import annotations


def lost_wikipedia_pages(manifest: dict) -> list[str]:
    lost = []
    for s in manifest.get("sources", []):
        if not s.get("accounted", True):
            counted = sum(s.get("pages", {}).values())
            blocks = [q for q in s.get("quarantined", []) if "truncated" in q]  # damaged bzip2 blocks
            lost.append(f"{s['path']}: {s.get('pages_in_input')} pages seen, {counted} written or dropped with a reason"
                        + (f"; {len(blocks)} run(s) of damaged bzip2 blocks (bytes "
                           + ", ".join(f"{q['offset']}-{q['end']}" for q in blocks[:5])
                           + ") quarantined, the pages inside them lost" if blocks else "")
                        + ("; the file ends early (truncated)" if s.get("truncated") else ""))
    return lost


def lost_wikidata_lines(manifest: dict) -> list[str]:
    lost = []
    for s in manifest.get("wikidata", []):
        if s.get("truncated"):
            t = s["truncated"]
            lost.append(f"{s['path']}: unreadable after uncompressed byte {t['after_offset']} ({t['error']}); "
                        f"{s['lines']} lines read before it")
        elif s.get("damaged"):
            runs = s["damaged"]
            lost.append(f"{s['path']}: {len(runs)} run(s) of damaged bzip2 blocks (bytes "
                        + ", ".join(f"{d['start']}-{d['end']}" for d in runs[:5])
                        + f"), the lines inside them lost; {s['lines']} lines read around them")
        elif not s.get("accounted", True):
            lost.append(f"{s['path']}: {s['lines']} lines, {s['written']} written + {sum(s['skipped'].values())} skipped")
    return lost


def empty_sets(manifest: dict) -> list[str]:
    pages, sets = manifest.get("pages", {}), manifest.get("sets", {})
    lost = []
    if pages.get("in_input", 0) and not sets.get("sentences", {}).get("rows", 0):
        lost.append(f"sentences: 0 rows from {pages['in_input']} pages ({pages.get('dropped', {})})")
    if sets.get("sentences", {}).get("rows", 0) and "entity_pairs" in sets and not sets["entity_pairs"]["rows"]:
        lost.append("entity_pairs: 0 rows (no entity linked more than --entity-link-threshold times, or no "
                    "sitelink of the --wikis in the Wikidata input)")
    if manifest.get("links_accounted") is False:
        lost.append("entity_pairs: the link mentions do not add up to the pairs written + dropped")
    return lost


def lost_input(manifest: dict) -> list[str]:
    """One line per loss (empty when the job accounted for all its input): what ``python -m ingest`` exits 1 on."""
    return lost_wikipedia_pages(manifest) + lost_wikidata_lines(manifest) + empty_sets(manifest)
