"""The parquet contracts between stages, declared once.

Every set ingest writes is a directory of ``*.parquet`` files plus a
``_manifest.json``. Readers check a set against these schemas before they
allocate anything (``setformat.io.check_set``), so a wrong or missing column is
an error that names the set and the column. Reading and writing sets is
``setformat/io.py``; this module only declares.
"""

from __future__ import annotations


import pyarrow as pa

SCHEMA_VERSION = 2

# SimCSE (unsupervised): one sentence per row, with where it came from.
SENTENCES = pa.schema(
    [
        pa.field("sentence", pa.string(), nullable=False),
        pa.field("page_id", pa.int64()),
        pa.field("title", pa.string()),
        pa.field("sentence_index", pa.int32()),
        pa.field("wiki", pa.string()),
    ]
)

# EASE: a sentence, the entity it links to (positive) and one hard-negative
# entity of the same Wikidata P31 type that is not linked on the same page.
# ``*_entity`` columns index the rows of the ``entities`` set.
ENTITY_PAIRS = pa.schema(
    [
        pa.field("sentence", pa.string(), nullable=False),
        pa.field("page_id", pa.int64()),
        pa.field("positive_qid", pa.string(), nullable=False),
        pa.field("positive_title", pa.string(), nullable=False),
        pa.field("positive_entity", pa.int64(), nullable=False),
        pa.field("negative_qid", pa.string(), nullable=False),
        pa.field("negative_title", pa.string(), nullable=False),
        pa.field("negative_entity", pa.int64(), nullable=False),
        pa.field("wiki", pa.string()),  # the sentence's wiki (multilingual sets mix several)
    ]
)

# The entity vocabulary of an entity_pairs set: row ``entity_index`` is the
# row of the trainable entity table. Index 0 is reserved for padding.
ENTITIES = pa.schema(
    [
        pa.field("entity_index", pa.int64(), nullable=False),
        pa.field("qid", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("link_count", pa.int64()),
        pa.field("types", pa.list_(pa.string())),
    ]
)

# What ingest keeps of a Wikidata dump, written once so later jobs join
# against it instead of re-reading the dump: per item, the labels in the
# configured languages, the sitelinks of the configured wikis and the
# configured properties' values (deprecated ranks and non-value snaks
# skipped; an item value is its QID, other values their main literal).
WIKIDATA = pa.schema(
    [
        pa.field("qid", pa.string(), nullable=False),
        pa.field("labels", pa.list_(pa.struct([("language", pa.string()), ("value", pa.string())]))),
        pa.field("sitelinks", pa.list_(pa.struct([("wiki", pa.string()), ("title", pa.string())]))),
        pa.field("claims", pa.list_(pa.struct([("property", pa.string()), ("value", pa.string())]))),
    ]
)

# SimCSE supervised / GaussCSE: (premise, entailment, contradiction) from NLI
# corpora; ``source`` names the pair corpus (``ingest/pairs/``).
NLI_TRIPLETS = pa.schema(
    [
        pa.field("premise", pa.string(), nullable=False),
        pa.field("entailment", pa.string(), nullable=False),
        pa.field("contradiction", pa.string(), nullable=False),
        pa.field("source", pa.string()),
    ]
)

# RSE: a typed pair (sentence1, relation, sentence2) with an in-relation hard
# negative (null when the corpus has none) and the relation's configured weight.
RELATION_TRIPLES = pa.schema(
    [
        pa.field("sentence1", pa.string(), nullable=False),
        pa.field("relation", pa.string(), nullable=False),
        pa.field("sentence2", pa.string(), nullable=False),
        pa.field("hard_negative", pa.string(), nullable=True),
        pa.field("weight", pa.float32(), nullable=False),
        pa.field("source", pa.string()),
    ]
)

# The lead section (the text before the first heading) of every article, with
# its item through the wiki's sitelinks (null when no item links the page):
# the texts of AspectCSE, usable by any method.
INTROS = pa.schema(
    [
        pa.field("wiki", pa.string(), nullable=False),
        pa.field("page_id", pa.int64(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("qid", pa.string()),
        pa.field("text", pa.string(), nullable=False),
    ]
)

# AspectCSE's aspect labels, one row per (entity, aspect property): the values
# of the property (a set: an item may have several countries), as item ids and
# their label text in the chosen language (the id when the item has no label).
# Both routes (a SPARQL endpoint, or the ``wikidata`` set) write this table.
ASPECT_LABELS = pa.schema(
    [
        pa.field("qid", pa.string(), nullable=False),
        pa.field("wiki", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),  # the entity's article in ``wiki``
        pa.field("property", pa.string(), nullable=False),  # e.g. P17
        pa.field("label_qids", pa.list_(pa.string()), nullable=False),
        pa.field("labels", pa.list_(pa.string()), nullable=False),
    ]
)

# AspectCSE training rows for one variant (``single`` on one property, or the
# multi-aspect ``intersection`` / ``union`` of several): the anchor and positive
# intros share a label on the variant's aspect(s) (every one for intersection,
# at least one for union); the negative shares none, or is a random article
# without aspect labels (``negative_kind`` = ``random``, ``negative_qid`` null).
ASPECT_TRIPLETS = pa.schema(
    [
        pa.field("anchor", pa.string(), nullable=False),
        pa.field("positive", pa.string(), nullable=False),
        pa.field("negative", pa.string(), nullable=False),
        pa.field("anchor_qid", pa.string(), nullable=False),
        pa.field("positive_qid", pa.string(), nullable=False),
        pa.field("negative_qid", pa.string()),
        pa.field("negative_kind", pa.string(), nullable=False),  # labelled | random
        pa.field("variant", pa.string(), nullable=False),  # single | intersection | union
        pa.field("aspects", pa.list_(pa.string()), nullable=False),  # the properties, e.g. [P17, P452]
    ]
)

# The test side of the entity-level split, for aspect retrieval: one row per
# (document, aspect property) the document has at least one label for.
ASPECT_DOCS = pa.schema(
    [
        pa.field("qid", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("aspect", pa.string(), nullable=False),  # a property id, e.g. P17 (or a PwC aspect name)
        pa.field("labels", pa.list_(pa.string()), nullable=False),  # label ids on that aspect
    ]
)

# DSBATS-sn (``ingest/dsbats/``): one row per BATS analogy pair (word, answer)
# lifted to a pair of definition sentences from a semantic network. ``cluster``
# is the unit of "same relationship" (a BATS category, e.g. E07); ``first_*``
# is the BATS word's side, ``second_*`` the answer's.
BATS_DEFINITIONS = pa.schema(
    [
        pa.field("category", pa.string(), nullable=False),  # E07
        pa.field("relation", pa.string(), nullable=False),  # animal - sound
        pa.field("cluster", pa.string(), nullable=False),  # pairs of one cluster hold one relationship
        pa.field("pair_id", pa.string(), nullable=False),  # E07:012:bark (category, BATS line, answer)
        pa.field("first_word", pa.string(), nullable=False),
        pa.field("second_word", pa.string(), nullable=False),
        pa.field("first_synset", pa.string(), nullable=False),  # dog.n.01 (WordNet) / bn:00015267n (BabelNet)
        pa.field("second_synset", pa.string(), nullable=False),
        pa.field("first_definition", pa.string(), nullable=False),
        pa.field("second_definition", pa.string(), nullable=False),
        pa.field("sense_rule", pa.string(), nullable=False),  # how the senses were chosen (ingest/dsbats/senses.py)
        pa.field("split", pa.string(), nullable=False),  # train | test | held_out (ingest/dsbats/contrastive.py)
    ]
)

# DSBATS4CL: p = (anchor_first, anchor_second) and p+ = (positive_first,
# positive_second), two definition pairs of one cluster; p- is p+ reversed (the slides' figure), or p
# reversed (dsbats.reversed_pair: anchor), by construction, so it is not stored twice.
DSBATS4CL = pa.schema(
    [
        pa.field("anchor_first", pa.string(), nullable=False),
        pa.field("anchor_second", pa.string(), nullable=False),
        pa.field("positive_first", pa.string(), nullable=False),
        pa.field("positive_second", pa.string(), nullable=False),
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("anchor_id", pa.string(), nullable=False),
        pa.field("positive_id", pa.string(), nullable=False),
    ]
)

# SRSD items (sentence relationship similarity distinguishing): a query pair
# and candidate pairs, exactly one of which (``answer``) holds the query's
# relationship. ``kind``: ``other_cluster`` (the distractors come from other
# clusters) or ``reversed`` (the distractor is the answer pair reversed).
SRSD = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("query_first", pa.string(), nullable=False),
        pa.field("query_second", pa.string(), nullable=False),
        pa.field("candidates_first", pa.list_(pa.string()), nullable=False),
        pa.field("candidates_second", pa.list_(pa.string()), nullable=False),
        pa.field("answer", pa.int32(), nullable=False),  # index into candidates_*
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "bats_definitions": BATS_DEFINITIONS,
    "dsbats4cl": DSBATS4CL,
    "srsd": SRSD,
    "intros": INTROS,
    "aspect_labels": ASPECT_LABELS,
    "aspect_triplets": ASPECT_TRIPLETS,
    "aspect_docs": ASPECT_DOCS,
    "nli_triplets": NLI_TRIPLETS,
    "relation_triples": RELATION_TRIPLES,
    "sentences": SENTENCES,
    "entity_pairs": ENTITY_PAIRS,
    "entities": ENTITIES,
    "wikidata": WIKIDATA,
}


class SchemaError(ValueError):
    """A parquet set does not match its declared schema."""
