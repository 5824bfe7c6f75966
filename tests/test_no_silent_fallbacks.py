"""Issue 38: no silent fallbacks. A base model whose sentence-transformers modules cannot be read or looked up
is an error naming the model (never a plain encoder without its Pooling or Normalize); a bad line of EASE's
entity vectors file is an error naming file and line; `structcse` without its configs/ folder is an error
naming the folder (never the method's defaults)."""

import json
import shutil
from pathlib import Path

import pytest

from train.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A plain transformers folder (save_pretrained: no modules.json)."""
    from train.tiny_bert import build_tiny_bert

    texts = ["the Globex company sold steel", "rivers run to the sea", "a small town by the river"]
    return build_tiny_bert(texts, tmp_path_factory.mktemp("plain") / "tiny_bert", vocab_size=60, hidden_size=16,
                           num_layers=1, num_heads=2, intermediate_size=32, max_position_embeddings=32)


def _st_folder(tiny_bert, folder: Path, modules, pooling_config: dict | None = None) -> Path:
    """A copy of the tiny BERT with ``modules`` as its modules.json (and a 1_Pooling/config.json if given)."""
    shutil.copytree(tiny_bert, folder)
    (folder / "modules.json").write_text(modules if isinstance(modules, str) else json.dumps(modules))
    if pooling_config is not None:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
    return folder


# ------------------------------------------------------------------ a base model's sentence-transformers modules


def test_a_missing_pooling_module_is_an_error_not_the_configs_pooling(tiny_bert, tmp_path):
    """modules.json names a Pooling module whose folder is not there: the run stops and says so (it used to
    train with the config's pooling, as if the base were a plain encoder)."""
    from train.config import load_config
    from train.encoder import base_pooling
    from train.plan import decide_pooling

    folder = _st_folder(tiny_bert, tmp_path / "st", [TRANSFORMER, POOLING, NORMALIZE])
    with pytest.raises(ConfigError, match=r"model '.*st'.*1_Pooling/config.json"):
        base_pooling(str(folder))
    cfg = load_config(REPO / "configs" / "simcse_sup.yaml", [f"model={folder}"])
    with pytest.raises(ConfigError, match="1_Pooling/config.json") as caught:
        decide_pooling(cfg)
    assert str(caught.value).count("model '") == 1 and "\n" not in str(caught.value)


@pytest.mark.parametrize("modules", [
    json.dumps({"0": TRANSFORMER, "2": NORMALIZE}),  # not a list
    json.dumps([TRANSFORMER, {"idx": 2, "path": "2_Normalize"}]),  # a module without its type
    json.dumps([TRANSFORMER, "sentence_transformers.models.Normalize"]),  # a module that is not an object
    "[{not json",
], ids=["not-a-list", "no-type", "not-an-object", "corrupt"])
def test_a_broken_modules_list_is_an_error_not_a_plain_encoder(tiny_bert, tmp_path, modules):
    from train.encoder import Encoder

    folder = _st_folder(tiny_bert, tmp_path / "st", modules)
    with pytest.raises(ConfigError, match=r"model '.*st'.*modules.json") as caught:
        Encoder(str(folder), pooling="mean", max_len=16)
    assert "\n" not in str(caught.value)


def _hub_cache(root: Path, repo: str, files: dict[str, str], absent: list[str]) -> None:
    """A Hugging Face cache holding ``repo`` at one commit: ``files`` cached, ``absent`` recorded as not in
    the repo (the ``.no_exist`` markers an online lookup leaves)."""
    commit = "0" * 40
    base = root / f"models--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    for name, text in files.items():
        (base / "snapshots" / commit / name).parent.mkdir(parents=True, exist_ok=True)
        (base / "snapshots" / commit / name).write_text(text)
    for name in absent:
        (base / ".no_exist" / commit / name).parent.mkdir(parents=True, exist_ok=True)
        (base / ".no_exist" / commit / name).touch()


def test_a_hub_lookup_that_cannot_tell_is_an_error_naming_the_model(tmp_path, monkeypatch):
    """Offline (the tests set HF_HUB_OFFLINE) and modules.json not in the cache: whether the base normalizes is
    unknown, so it is an error naming the model and the cause (it used to read as 'no Normalize'). A repo
    known to have no modules.json (the cache's .no_exist marker) is a plain encoder; a cached one is read."""
    from huggingface_hub import constants

    from train.encoder import base_normalizes, base_pooling

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    _hub_cache(tmp_path / "hub", "org/unknown", {"config.json": "{}"}, [])
    _hub_cache(tmp_path / "hub", "org/plain", {"config.json": "{}"}, ["modules.json"])
    st_files = {"config.json": "{}", "modules.json": json.dumps([TRANSFORMER, POOLING, NORMALIZE]),
                "1_Pooling/config.json": json.dumps({"pooling_mode_mean_tokens": True})}
    _hub_cache(tmp_path / "hub", "org/st", st_files, [])
    with pytest.raises(ConfigError, match=r"model 'org/unknown'.*modules.json.*LocalEntryNotFoundError") as caught:
        base_normalizes("org/unknown")
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="model 'org/unknown'"):
        base_pooling("org/unknown")
    assert base_normalizes("org/plain") is False and base_pooling("org/plain") is None
    assert base_normalizes("org/st") is True and base_pooling("org/st") == "mean"


def test_a_plain_folder_is_a_plain_encoder_and_a_sentence_transformers_one_keeps_its_modules(tiny_bert, tmp_path):
    from train.encoder import Encoder, base_normalizes, base_pooling

    assert base_normalizes(str(tiny_bert)) is False and base_pooling(str(tiny_bert)) is None
    assert Encoder(str(tiny_bert), pooling="mean", max_len=16).normalize is False
    folder = _st_folder(tiny_bert, tmp_path / "st", [TRANSFORMER, POOLING, NORMALIZE],
                        {"word_embedding_dimension": 16, "pooling_mode_cls_token": True})
    assert base_normalizes(str(folder)) is True and base_pooling(str(folder)) == "cls_raw"
    enc = Encoder(str(folder), pooling="cls_raw", max_len=16)
    assert enc.normalize is True
    assert enc.encode(["rivers run to the sea"]).norm(dim=-1).item() == pytest.approx(1.0, abs=1e-5)


# ------------------------------------------------------------------ EASE's entity vectors


def _vectors(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("bad, cause", [
    ("ENTITY/Globex 0.5", "2 fields"),  # a vector cut short: was skipped without a word
    ("ENTITY/Globex 0.5 zero 0.5", "not a number"),  # a value that is not a number: was a bare float() error
], ids=["short", "not-a-number"])
def test_a_bad_entity_vector_line_is_an_error_naming_file_and_line(tmp_path, bad, cause):
    from train.methods.ease import load_entity_vectors

    path = _vectors(tmp_path / "vectors.txt", ["2 3", "ENTITY/Acme_Works 0.1 0.2 0.3", bad])
    with pytest.raises(ValueError, match=f"{path}:3: .*{cause}") as caught:
        load_entity_vectors(path, {"Acme Works": 1, "Globex": 2}, 3)
    assert "\n" not in str(caught.value)


def test_good_entity_vector_lines_still_load(tmp_path):
    from train.methods.ease import load_entity_vectors

    path = _vectors(tmp_path / "vectors.txt", ["3 2", "ENTITY/Acme_Works 0.1 0.2", "ENTITY/Gus Dane 1 2", "",
                                               "ENTITY/Other 3 4"])
    assert load_entity_vectors(path, {"Acme Works": 1, "Gus Dane": 2}, 2) == ([1, 2], [[0.1, 0.2], [1.0, 2.0]])


# ------------------------------------------------------------------ structcse's shipped configs


def test_training_config_without_its_configs_folder_is_an_error(tmp_path, monkeypatch):
    """configs/ not beside the package (an install without it): an error naming the folder looked in, not
    the method's defaults."""
    import structcse.configs

    monkeypatch.setattr(structcse.configs, "CONFIGS", tmp_path / "configs")
    with pytest.raises(ConfigError, match=f"{tmp_path / 'configs'}"):
        structcse.configs.training_config("simcse_unsup", ["epochs=1"])
    (tmp_path / "configs").mkdir()
    with pytest.raises(ConfigError, match=f"{tmp_path / 'configs' / 'simcse_unsup.yaml'}"):
        structcse.configs.training_config("simcse_unsup", ["epochs=1"])


def test_the_repositorys_configs_are_read_and_shipped_in_the_wheel():
    """In a checkout configs/ is read from the repository; a wheel installs it beside the packages
    (pyproject.toml: configs and configs.tune are packages of data, their *.yaml package data), where the
    same lookup finds it."""
    from setuptools import find_namespace_packages

    import structcse.configs

    assert structcse.configs.CONFIGS == REPO / "configs"
    assert structcse.configs.training_config("ease", ["epochs=1"]).method == "ease"
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = find_namespace_packages(str(REPO), include=setup["packages"]["find"]["include"])
    shipped = {f"{package.replace('.', '/')}/{name}"
               for package, patterns in setup.get("package-data", {}).items() if package in packages
               for pattern in patterns for name in
               (p.name for p in (REPO / package.replace(".", "/")).glob(pattern))}
    yamls = {str(p.relative_to(REPO)) for p in (REPO / "configs").rglob("*.yaml")}
    assert yamls and yamls <= shipped
