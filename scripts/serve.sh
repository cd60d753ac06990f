#!/usr/bin/env bash
# The main job: installs dependencies, builds vela, and serves a model over the OpenAI-compatible
# HTTP API on 127.0.0.1:${PORT:-8080}.
# Usage: scripts/serve.sh [MODEL.gguf] [extra `vela serve` flags...]
# Without a model it synthesizes a small random-weight model (its output is noise) with a
# built-in vocabulary, so the whole API can be tried on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target vela
vela=./build/release/tools/vela
model="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$model" ]; then
  model=build/release/models/tiny-random-q8_0.gguf
  if [ ! -f "$model" ]; then
    mkdir -p "$(dirname "$model")"
    echo "serve.sh: no model given: synthesizing a small random-weight model ($model)" >&2
    "$vela" synth -o "$model" --shape tiny --type Q8_0 --vocab-from builtin --quiet
  fi
fi
if [ ! -f "$model" ]; then
  echo "serve.sh: no model file '$model'" >&2
  exit 1
fi
# Clients (and the README's examples) call the model "vela" unless a name is given.
name_flag=(--served-model-name vela)
for arg in "$@"; do
  case "$arg" in --served-model-name | --served-model-name=*) name_flag=() ;; esac
done
exec "$vela" serve -m "$model" --port "${PORT:-8080}" "${name_flag[@]}" "$@"
