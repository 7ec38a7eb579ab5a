#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan; fuzz/) in build-fuzz and runs each for a bounded time on a
# copy of its committed seed corpus (fuzz/corpus/<target>). A crash, leak, sanitizer report, hang or timeout fails
# the run; the reproducer is kept in build-fuzz/fuzz-artifacts/. Prints the number of inputs each target executed.
# usage: scripts/fuzz.sh [--seconds N] [target...]   (default: 20 seconds for each of every target)
#        scripts/fuzz.sh --build-only                 (builds the targets and runs none)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
build_only=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -*) echo "usage: scripts/fuzz.sh [--seconds N] [target...] | --build-only" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(config host_call filesystem disk volume smb iscsi system)

launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCSI_PROXY_FUZZ=ON "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target csi_proxy_fuzz
[ "$build_only" = 0 ] || exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts=build-fuzz/fuzz-artifacts
export ASAN_OPTIONS=detect_leaks=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for target in "${targets[@]}"; do
  # The fuzzer adds what it finds to its corpus directory: a copy keeps the committed seeds as they are.
  cp -r "fuzz/corpus/$target" "$work/$target"
  log=$work/$target.log
  mkdir -p "$artifacts"
  status=ok
  if ! "build-fuzz/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$target-" "$work/$target" >"$log" 2>&1; then
    status=FAILED
    failed+=("$target")
    tail -n 80 "$log"
  fi
  units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(ls "$work/$target" | wc -l)
  printf 'fuzz %-10s %s: %s inputs executed in %ss, corpus %s\n' "$target" "$status" "${units:-?}" "$seconds" "$corpus"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (reproducers in $artifacts/)" >&2
  exit 1
fi
