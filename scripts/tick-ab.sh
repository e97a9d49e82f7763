#!/usr/bin/env bash
# Interleaved A/B of storage.BenchmarkTick (the background tick over 1 M
# idle series): A is BASE (a revision; the benchmark file of the working
# tree is copied into it so both run the same benchmark), B the working
# tree. Prints each run with the load and, per round, B's cpu-ms/op over
# A's. Usage: BASE=a4a0625 ROUNDS=8 scripts/tick-ab.sh
set -euo pipefail
BASE=${BASE:?BASE revision}
ROUNDS=${ROUNDS:-8}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$BASE" | tar -x -C "$work"
mkdir -p "$work/bin"
cp "$root/dbnode/storage/tick_bench_test.go" "$work/dbnode/storage/"
(cd "$work" && go test -c -o "$work/bin/A.test" ./dbnode/storage)
(cd "$root" && go test -c -o "$work/bin/B.test" ./dbnode/storage)
for r in $(seq 1 "$ROUNDS"); do
	for v in A B; do
		line=$(cd "$work" && "$work/bin/$v.test" -test.run XXX -test.bench BenchmarkTick -test.benchtime=10x 2>&1 | grep '^BenchmarkTick')
		echo "round=$r $v $line load=$(cut -d' ' -f1 /proc/loadavg)"
	done
done | tee "$work/runs.txt"
awk '$2=="A"{a[$1]=$(NF-2)} $2=="B"{printf "%s B/A cpu %.3f\n", $1, $(NF-2)/a[$1]}' "$work/runs.txt"
