#!/usr/bin/env bash
# Builds the libFuzzer targets (in the `asan` preset's tree: clang, ASan + UBSan) and runs each for
# $VELA_FUZZ_SECONDS seconds (default 30) from fresh seed corpora (fuzz/seeds.py), after replaying
# every input in fuzz/regressions/<target>/. Fails when any target crashes, leaks, or takes over
# 10 s on one input; the input that did it is kept in build/asan/findings/ and printed, so it can
# become a regression input.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${VELA_FUZZ_SECONDS:-30}
targets=(gguf_fuzzer tokenizer_fuzzer request_fuzzer chat_template_fuzzer grammar_fuzzer)

echo "== fuzz: configure and build"
cmake --preset asan >/dev/null
cmake --build build/asan -j "$(nproc)" --target "${targets[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 fuzz/seeds.py "$work/corpus"
findings=build/asan/findings
mkdir -p "$findings"

failed=()
for target in "${targets[@]}"; do
  bin=build/asan/fuzz/$target
  regressions=(fuzz/regressions/$target/*)
  if [ -e "${regressions[0]}" ]; then
    echo "== fuzz: $target replays ${#regressions[@]} regression inputs"
    if ! "$bin" -timeout=10 -rss_limit_mb=2048 "${regressions[@]}" >"$work/$target-replay.log" 2>&1; then
      tail -n 40 "$work/$target-replay.log"
      failed+=("$target (regression input)")
      continue
    fi
  fi
  echo "== fuzz: $target for ${seconds} s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
       -print_final_stats=1 -artifact_prefix="$findings/$target-" "$work/corpus/$target" \
       >"$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log"
    failed+=("$target")
    continue
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$work/$target.log" | tr '\n' ' '
  echo
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $findings)"
  exit 1
fi
echo "fuzz: all targets ran clean"
