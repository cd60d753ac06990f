#!/usr/bin/env bash
# Builds and runs the whole test suite: the Release build, then the sanitizer build
# (AddressSanitizer + UndefinedBehaviorSanitizer). Test data is read from ../shared when present.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=$(nproc)
for preset in release asan; do
  echo "== $preset: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== $preset: test"
  ctest --preset "$preset" -j "$jobs"
done
