#!/usr/bin/env bash
# The main job: installs dependencies, builds vela, and runs it on a model.
# Usage: scripts/serve.sh [MODEL.gguf] [PROMPT]
# Without a model it uses ../shared/models/aidreams260K.gguf when present (a small trained model).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target vela
model="${1:-../shared/models/aidreams260K.gguf}"
prompt="${2:-Once upon a time}"
if [ ! -f "$model" ]; then
  echo "no model file '$model': pass a GGUF file, e.g. scripts/serve.sh path/to/model.gguf" >&2
  exit 1
fi
exec ./build/release/tools/vela generate -m "$model" -p "$prompt" -n 64
