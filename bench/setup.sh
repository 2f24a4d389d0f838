#!/usr/bin/env sh
# Create the benchmark venv (bench/.venv) with geppetto and the peers: sh bench/setup.sh
set -eu
cd "$(dirname "$0")/.."
python3 -m venv bench/.venv
bench/.venv/bin/pip install -q --upgrade pip
bench/.venv/bin/pip install -q -r bench/requirements.txt
