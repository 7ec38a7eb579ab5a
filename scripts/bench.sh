#!/usr/bin/env bash
# Builds and runs every benchmark, then writes the report (bench/report/latest.md and latest.json). The report
# it replaces is compared with: each ratio and value is shown next to its previous value.
#
#   scripts/bench.sh [--quick] [--build-dir DIR] [--out DIR]
#
#   --quick          a smoke run: fewer rounds and iterations; the report goes to <build-dir>/bench/report-quick
#                    unless --out is given, so it never replaces the committed reference report
#   --build-dir DIR  the build tree (default build-bench: a separate tree, tests off, benchmarks on)
#   --out DIR        where latest.md and latest.json go (default bench/report)
#
# Needs root for loop devices and mounts (without it those parts are skipped and the report says so). Takes a few
# minutes plus the build. Benchmarks are not tests: ctest never runs them. Method: docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
build_dir=build-bench
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    *) echo "usage: scripts/bench.sh [--quick] [--build-dir DIR] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$out" ]; then
  if [ "$quick" = 1 ]; then out="$build_dir/bench/report-quick"; else out=bench/report; fi
fi

bash scripts/install-deps.sh
jobs=$(nproc)

echo "== build ($build_dir)"
# The project's default build type, named so that the report can say what was measured.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCSI_PROXY_BUILD_TESTS=OFF -DCSI_PROXY_BUILD_BENCH=ON \
  >/dev/null
cmake --build "$build_dir" -j"$jobs" --target csi_proxy_bench

results="$build_dir/bench/results"
rm -rf "$results"
mkdir -p "$results/raw" "$results/logs" "$out"
notes="$results/build.records.tsv"
: >"$notes"

# Each API group (its library and its benchmark program) is built on its own: one group that does not build
# is reported and skipped, and a stale library of it is removed so that old code is never measured.
while read -r group target; do
  [ -n "$group" ] || continue
  if cmake --build "$build_dir" -j"$jobs" --target "$target" >"$results/logs/build-$group.log" 2>&1; then
    echo "built $group"
  else
    echo "warning: $target did not build (see $results/logs/build-$group.log); its benchmarks are skipped" >&2
    printf 'N\tbuild\t%s did not build, so it was not measured\n' "$target" >>"$notes"
    if [ "$group" = staging ] || [ "$group" = isolation ]; then
      rm -f "$build_dir/bench/bin/bench_$group"
    else
      rm -f "$build_dir/lib/csi-proxy/plugins/libcsi-proxy-$group.so" "$build_dir/bench/bin/bench_methods_$group"
    fi
  fi
done <"$build_dir/bench/group_targets.txt"

bin="$build_dir/bench/bin"
common_args=()
[ "$quick" = 1 ] && common_args+=(--quick)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

run() {  # program, extra args...
  local name=$1
  shift
  echo "== $name"
  if ! "$bin/$name" "${common_args[@]}" --results="$results/$name.records.tsv" "$@"; then
    echo "warning: $name failed; the report notes it" >&2
    printf 'N\tbuild\t%s exited with an error; its numbers are missing or partial\n' "$name" >>"$notes"
  fi
}

# The most noise-sensitive measurement first.
run bench_host_overhead
if [ -x "$bin/bench_isolation" ]; then
  run bench_isolation
else
  printf 'N\tisolation\tskipped: bench_isolation was not built (it needs the filesystem protos)\n' >>"$notes"
fi
for program in "$bin"/bench_methods_*; do
  [ -x "$program" ] || continue
  name=$(basename "$program")
  run "$name" --benchmark_out="$results/raw/$name.json" --benchmark_out_format=json
done
if [ -x "$bin/bench_staging" ]; then
  run bench_staging --benchmark_out="$results/raw/bench_staging.json" --benchmark_out_format=json
else
  printf 'N\tstaging\tskipped: the disk and volume groups (their protos) are not in the tree yet\n' >>"$notes"
fi
run bench_startup
# The soak (bench/soak): 10^5 calls by 64 clients; it checks rather than measures, so it writes no records.
echo "== bench_soak"
soak_args=()
[ "$quick" = 1 ] && soak_args+=(--short)
if ! "$bin/bench_soak" "${soak_args[@]}"; then
  echo "warning: bench_soak failed" >&2
  printf 'N\tsoak\tbench_soak failed: unexpected answers, growth of the host, or leftovers (see its output)\n' >>"$notes"
fi

previous=()
if [ -f "$out/latest.json" ]; then
  cp "$out/latest.json" "$results/previous.json"
  previous=(--previous "$results/previous.json")
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && commit="$commit + uncommitted changes"
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
command="scripts/bench.sh"
[ "$quick" = 1 ] && command="$command --quick"
"$bin/bench_report" --results-dir "$results" --markdown "$out/latest.md" --json "$out/latest.json" \
  "${previous[@]}" --commit "$commit" --build-type "${build_type:-default}" --command "$command" \
  --load-before "$load_before"
# The call-path goals (issue 12), each as a ratio next to its goal.
sed -n '/^## Call-path targets/,/^## Ratios/{/^## Ratios/d;p}' "$out/latest.md"
