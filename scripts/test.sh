#!/usr/bin/env bash
# Installs what is needed, builds everything and runs every test: once in a normal build, then again with
# AddressSanitizer and UndefinedBehaviorSanitizer (skip that pass with --no-sanitize), then the VM lane: the
# kernel tests (ctest label `kernel`) on Debian's stock kernel under QEMU with systemd as PID 1 (tests/vm/README.md;
# skip it with --no-vm), then the fuzzing step: every libFuzzer target for a bounded time (scripts/fuzz.sh; skip it
# with --no-fuzz), then the Windows lane: the tree cross-built for Windows with MinGW-w64 and its tests run under
# Wine (scripts/windows/test.sh; --no-windows skips it in a local run only, CI always runs it). Tests that need root,
# loop devices or a kernel feature skip with a message saying what is missing in the normal passes; the VM lane is
# where those needing cifs, iscsi_tcp or systemd run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each lane's line says when it began, counted from the start of the run.
lane() { echo "== $* (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }

sanitize=1
vm=1
fuzz=1
windows=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    --no-vm) vm=0 ;;
    --no-fuzz) fuzz=0 ;;
    --no-windows) windows=0 ;;
    *) echo "usage: scripts/test.sh [--no-sanitize] [--no-vm] [--no-fuzz] [--no-windows]" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
# The Kubernetes manifests' validator, at the versions pinned in deploy/validate/package-lock.json (into its
# gitignored node_modules); without it, that test skips and says so.
(cd deploy/validate && npm ci --no-audit --no-fund --loglevel=error) ||
  echo "test.sh: npm ci in deploy/validate failed; the manifest test will skip" >&2
jobs=$(nproc)

# A compiler cache (installed with the build dependencies) makes a run after a small change, or in a second clone on
# the same machine, rebuild only what changed. Paths are taken relative to the checkout, so clones share it.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# The builds of the later lanes that test nothing yet (the fuzzing targets, then the Windows dependency prefix and
# tree) run beside the normal and sanitizer passes, at a lower CPU priority: those passes' tests leave much of the
# two cores idle, and a cold run (empty compiler cache, no Windows prefix) fits in CI's time only so
# (docs/testing.md, "How long a run takes"). Each lane waits for them, then builds again, which finds nothing left
# to do, or stops on the same error with its message.
mkdir -p build-logs
background_log=build-logs/background.log
background_pid=
if [ "$fuzz" = 1 ] || [ "$windows" = 1 ]; then
  # setsid: a process group of its own, which the exit trap ends if the run stops early. A new session is also a
  # new scheduling group where the kernel groups a session's processes (autogroup), which would share the CPU
  # equally with the run's own whatever their nice value: that group's own nice value is set too.
  setsid nice -n 10 bash -c '
    echo 10 >/proc/self/autogroup 2>/dev/null || true
    started=$(date +%s)
    if [ "$1" = 1 ]; then bash scripts/fuzz.sh --build-only || echo "background: the fuzzing build failed"; fi
    if [ "$2" = 1 ]; then bash scripts/windows/build.sh || echo "background: the Windows build failed"; fi
    echo "background: builds done in $(($(date +%s) - started)) s"' _ "$fuzz" "$windows" >"$background_log" 2>&1 &
  background_pid=$!
  trap '[ -z "$background_pid" ] || kill -- -"$background_pid" 2>/dev/null || true' EXIT
fi
wait_for_background() {
  [ -n "$background_pid" ] || return 0
  lane "waiting for the background builds (log: $background_log)"
  wait "$background_pid" || true
  background_pid=
  tail -n 1 "$background_log"
}

# The failed tests' first failure lines, from ctest's log of the run, for the end of the output: a CI report that
# keeps only the last lines of a run then says what failed and where, not only which test.
failure_digest() {  # build dir
  awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $3; n = 0; delete out }
    /^Output:$/ { inside = 1; next }
    /^<end of output>$/ { inside = 0; next }
    inside { out[++n] = $0; next }
    /^Test Failed\.$|^Test time out\.|^Test Timeout|Exception:/ {
      print "-- " name ":"
      shown = 0
      for (i = 1; i <= n && shown < 12; i++) {
        if (out[i] ~ /(: Failure|: error:|runtime error:|ERROR: AddressSanitizer|\[  FAILED  \])/ || shown > 0) {
          print "   " substr(out[i], 1, 300); shown++
        }
      }
      if (shown == 0) for (i = (n > 6 ? n - 5 : 1); i <= n; i++) print "   " substr(out[i], 1, 300)
    }
  ' "$1/Testing/Temporary/LastTest.log" 2>/dev/null | head -n 40
}

run_suite() {  # build dir, extra cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCSI_PROXY_BUILD_BENCH=ON "${launcher[@]}" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  # Tests share loop devices, mounts and servers on loopback: one test binary at a time.
  if ! ctest --test-dir "$dir" --output-on-failure --timeout 900; then
    echo "== where the failed tests of $dir failed:"
    failure_digest "$dir"
    return 8
  fi
}

# Release keeps the normal pass's compile time down (no debug info); the sanitizer pass builds Debug at -O1.
lane "normal build"
run_suite build -DCMAKE_BUILD_TYPE=Release
lane "soak, short: 64 clients, every group's safe methods through the host (bench/soak)"
build/bench/bin/bench_soak --short
if [ "$vm" = 1 ]; then
  # The normal build's kernel tests again, in a VM with a stock kernel; fails the run when they fail or overrun.
  bash tests/vm/run.sh --build build --timeout 900
fi
if [ "$sanitize" = 1 ]; then
  lane "AddressSanitizer + UndefinedBehaviorSanitizer build"
  # gRPC keeps some process-lifetime allocations; leaks are judged in our own code by the tests' exit codes.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_odr_violation=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DCSI_PROXY_SANITIZE=ON -DCSI_PROXY_BUILD_BENCH=OFF
fi
wait_for_background
if [ "$fuzz" = 1 ]; then
  lane "libFuzzer targets (clang, ASan + UBSan), 20 s each"
  bash scripts/fuzz.sh --seconds 20
fi
if [ "$windows" = 1 ]; then
  lane "Windows: cross-built with MinGW-w64, tests under Wine"
  bash scripts/windows/test.sh
fi
lane "done"
