#!/usr/bin/env bash
# A new user's path: a fresh clone of this repository's HEAD, a fresh venv and an empty HOME, then every
# ```bash block of its README.md in order (bench/newcomer.py says what each command must write and which
# commands run with local stand-ins). Last line: one JSON object.
#   bash bench/newcomer.sh [WORKDIR]      # WORKDIR: a new folder beside the repository by default
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d -p "$(dirname "$repo")" newcomer.XXXXXX)}
mkdir -p "$work"
git clone -q "$repo" "$work/main"
# ../shared/data beside the clone, as beside the repository (tests and stand-ins read it)
if [ -e "$repo/../shared" ] && [ ! -e "$work/shared" ]; then ln -s "$(cd "$repo/../shared" && pwd)" "$work/shared"; fi
python3 -m venv "$work/venv"
mkdir -p "$work/home"
export HOME="$work/home" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
# shellcheck disable=SC1091
source "$work/venv/bin/activate"
echo "[newcomer] clone $work/main, venv $work/venv, HOME $HOME" >&2
cd "$work/main"
exec python bench/newcomer.py --repo . --logs "$work/logs"
