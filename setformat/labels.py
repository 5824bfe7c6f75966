"""The relation names of the pair sets and the label maps that give them (no Ray, no pyarrow: score reads NLI
data with them, ingest.pairs writes the sets).

A label map takes a raw label (compared as text, then case-insensitively) to a
relation, or to ``None``: the row is dropped as ``excluded_label``. Relation
names follow RSE (Wang & Li, 2022).
"""

from __future__ import annotations

# the two relations of an nli_triplets row (premise, entailment, contradiction)
NLI_RELATIONS = ("entailment", "contradiction")

# raw NLI labels (text): SNLI/MNLI jsonl, SentEval, SICK (case-insensitive); "-": no gold label
NLI_TEXT_LABELS = {"entailment": "entailment", "neutral": "neutral", "contradiction": "contradiction", "-": None}
# HF snli / multi_nli / glue mnli ClassLabel ids (-1: no gold label)
NLI_INT_LABELS = {"0": "entailment", "1": "neutral", "2": "contradiction", "-1": None}
# every relation a pair source can give (RSE's relation names)
RSE_RELATIONS = ("entailment", "neutral", "contradiction", "duplicate_question", "non_duplicate_question",
                 "paraphrase", "same_caption", "qa_entailment", "qa_not_entailment")
