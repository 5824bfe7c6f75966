"""EASE's ``entity_vectors`` (Wikipedia2Vec) as a bucket URI and as the pretrained ``.txt.bz2``: checked by
the config's validation and read by ``load_entity_vectors`` through infra.storage, like every other input."""

from __future__ import annotations

import bz2

import pytest

LINES = ["3 2", "ENTITY/Acme_Works 0.1 0.2", "ENTITY/Gus Dane 1 2", "ENTITY/Other 3 4"]


def test_entity_vectors_from_a_bucket_and_compressed(s3_server, tmp_path):
    from infra.storage import filesystem
    from train.methods.ease import EASE, load_entity_vectors

    local = tmp_path / "enwiki_100d.txt.bz2"
    local.write_bytes(bz2.compress(("\n".join(LINES) + "\n").encode()))
    uri = f"{s3_server}/w2v/enwiki_100d.txt.bz2"
    fs, inner = filesystem(uri)
    fs.put_file(str(local), inner)
    want = ([1, 2], [[0.1, 0.2], [1.0, 2.0]])
    assert load_entity_vectors(local, {"Acme Works": 1, "Gus Dane": 2}, 2) == want  # .bz2 as downloaded
    assert load_entity_vectors(uri, {"Acme Works": 1, "Gus Dane": 2}, 2) == want  # and from the bucket
    EASE.validate_options(EASE.Options(entity_vectors=uri), None)  # the config's check finds the object


def test_a_missing_entity_vectors_uri_is_a_config_error(s3_server):
    from train.errors import ConfigError
    from train.methods.ease import EASE

    with pytest.raises(ConfigError, match=r"ease\.entity_vectors: file 's3://.*/w2v/none\.txt' does not exist"):
        EASE.validate_options(EASE.Options(entity_vectors=f"{s3_server}/w2v/none.txt"), None)
