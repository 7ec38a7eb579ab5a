#!/usr/bin/env bash
# Installs what is needed, builds everything and runs every test: once in a normal build, then again with
# AddressSanitizer and UndefinedBehaviorSanitizer (skip that pass with --no-sanitize).
# Tests that need root, loop devices or a kernel feature skip with a message saying what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    *) echo "usage: scripts/test.sh [--no-sanitize]" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
jobs=$(nproc)

run_suite() {  # build dir, extra cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCSI_PROXY_BUILD_BENCH=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  # Tests share loop devices, mounts and servers on loopback: one test binary at a time.
  ctest --test-dir "$dir" --output-on-failure --timeout 900
}

# Release keeps the normal pass's compile time down (no debug info); the sanitizer pass builds Debug at -O1.
echo "== normal build"
run_suite build -DCMAKE_BUILD_TYPE=Release
if [ "$sanitize" = 1 ]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
  # gRPC keeps some process-lifetime allocations; leaks are judged in our own code by the tests' exit codes.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_odr_violation=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DCSI_PROXY_SANITIZE=ON -DCSI_PROXY_BUILD_BENCH=OFF
fi
