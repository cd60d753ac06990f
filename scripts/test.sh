#!/usr/bin/env bash
# Builds and runs the whole test suite: the Release build, the sanitizer build (AddressSanitizer +
# UndefinedBehaviorSanitizer), the engine and server tests under ThreadSanitizer, and then every
# libFuzzer target for a bounded time (scripts/fuzz.sh; VELA_FUZZ_SECONDS, default 30 each).
# Test data is read from ../shared when present.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=$(nproc)
for preset in release asan tsan; do
  echo "== $preset: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== $preset: test"
  ctest --preset "$preset" -j "$jobs"
done
./scripts/fuzz.sh
