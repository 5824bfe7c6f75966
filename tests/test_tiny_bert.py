"""The tiny test BERT is the same from one process to the next."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

BUILD = """
import sys

import pytest
from train.tiny_bert import build_tiny_bert
texts = ["Acme Corp is a software company in Ostravia.", "It was founded in 1987 by Mira Kessenbach."] * 20
build_tiny_bert(texts, sys.argv[1], vocab_size=200)
"""


@pytest.mark.end_to_end
def test_same_texts_give_byte_identical_model_in_another_process(tmp_path):
    builds = [subprocess.Popen([sys.executable, "-c", BUILD, str(tmp_path / name)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for name in ("a", "b")]
    for build in builds:  # two processes at once: each has its own hash seed and thread timing
        out, _ = build.communicate(timeout=120)
        assert build.returncode == 0, out.decode(errors="replace")[-2000:]
    for file in ("tokenizer.json", "model.safetensors", "config.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes(), file
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert tokenizer.tokenize("Acme software") == ["acme", "software"]
    assert tokenizer.tokenize("sofa") == ["s", "##o", "##f", "##a"]  # a word not in the vocabulary -> characters
