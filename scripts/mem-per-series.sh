#!/usr/bin/env bash
# mem-per-series.sh: resident bytes per active series, Tessera next to
# VictoriaMetrics on the same machine and workload (issue 18).
#
# For ROUNDS rounds, alternating which store goes first (the machine is
# shared; only interleaved runs compare), and never both at once, each
# store in turn:
#
#   1. starts fresh in an empty temp dir: Tessera as the embedded default
#      (own etcd, RF 1, autoInit) with only its ports changed;
#      VictoriaMetrics single-node with only -storageDataPath and
#      -httpListenAddr;
#   2. is fed `tessera bench --series SERIES --samples SAMPLES` (remote
#      write 1.0; VictoriaMetrics on /api/v1/write), every sample
#      acknowledged before the bench returns;
#   3. settles: at least SETTLE seconds (30), then until VmRSS moved less
#      than 1% over the last three 5 s readings (at most SETTLE_MAX, 180 s):
#      the node's first collections and ticks after the burst, VM's
#      in-memory parts flushed;
#   4. reports VmRSS (/proc/PID/status) and VmRSS / SERIES, the store's
#      CPU during the bench per sample (utime+stime); for Tessera
#      also the live heap: go_memstats_heap_alloc_bytes on /metrics right
#      after a forced collection (GET /debug/pprof/heap?gc=1), read after
#      VmRSS so that the collection does not change the resident figure.
#
# At the end: the median bytes per series of each store and the ratio.
#
# Usage:
#   scripts/mem-per-series.sh TESSERA_BIN [VM_BIN]
#   ROUNDS=3 scripts/mem-per-series.sh /tmp/base-tessera /tmp/vm/victoria-metrics
#   ONLY=tessera scripts/mem-per-series.sh ./tessera   # no VictoriaMetrics
#
# Environment: SERIES (1000000), SAMPLES (4), ROUNDS (2), SETTLE (30),
# SETTLE_MAX (180), PORT (19640: Tessera HTTP; RPC +1, etcd +2/+3,
# VictoriaMetrics +5), BENCH (the tessera that runs the bench; default
# TESSERA_BIN), BENCH_ARGS (extra bench flags), ONLY (tessera|vm), KEEP=1
# keeps the temp dir.
set -euo pipefail

TESSERA=${1:?usage: $0 TESSERA_BIN [VM_BIN]}
VM=${2:-/tmp/vm/victoria-metrics}
BENCH=${BENCH:-$TESSERA}
SERIES=${SERIES:-1000000}
SAMPLES=${SAMPLES:-4}
ROUNDS=${ROUNDS:-2}
SETTLE=${SETTLE:-30}
SETTLE_MAX=${SETTLE_MAX:-180}
PORT=${PORT:-19640}
BENCH_ARGS=${BENCH_ARGS:-}
ONLY=${ONLY:-}
KEEP=${KEEP:-0}
HZ=$(getconf CLK_TCK)
T_URL=http://127.0.0.1:$PORT
V_URL=http://127.0.0.1:$((PORT + 5))

stores=(tessera vm)
case "$ONLY" in
"") ;;
tessera | vm) stores=("$ONLY") ;;
*) echo "ONLY must be tessera or vm, got $ONLY" >&2; exit 2 ;;
esac
for b in "$TESSERA" "$BENCH"; do
	[ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done
if [ "$ONLY" != tessera ] && [ ! -x "$VM" ]; then
	echo "not an executable: $VM" >&2
	exit 2
fi

work=$(mktemp -d /tmp/mem-per-series.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ "$KEEP" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rss() { awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$1/status"; }

# ticks and wait_up
. "$(dirname "$0")/storelib.sh"

# settle: SETTLE seconds, then until three readings 5 s apart are within
# 1% of each other, or SETTLE_MAX seconds in all; prints the last VmRSS
# and how long it took.
settle() {
	local waited=0 a b c
	sleep "$SETTLE"
	waited=$SETTLE
	a=$(rss "$pid"); sleep 5; b=$(rss "$pid"); sleep 5; c=$(rss "$pid")
	waited=$((waited + 10))
	while [ "$waited" -lt "$SETTLE_MAX" ] &&
		! awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
			lo = a; hi = a; if (b < lo) lo = b; if (c < lo) lo = c; if (b > hi) hi = b; if (c > hi) hi = c
			exit !((hi - lo) <= 0.01 * hi) }'; do
		sleep 5
		waited=$((waited + 5))
		a=$b; b=$c; c=$(rss "$pid")
	done
	echo "$c $waited"
}

run() { # run STORE ROUND -> prints "rss_bytes settle_s heap_bytes ingest_ticks"
	local who=$1 dir=$work/$1-$2 url heap=- t0
	mkdir -p "$dir"
	if [ "$who" = tessera ]; then
		node_yml "$dir" "$PORT" "$SERIES" >"$dir/node.yml"
		"$TESSERA" node -f "$dir/node.yml" >"$dir/node.log" 2>&1 &
		pid=$!
		wait_up "$T_URL" /ready "$dir/node.log" "$pid"
		url=$T_URL
	else
		"$VM" -storageDataPath "$dir/data" -httpListenAddr "127.0.0.1:$((PORT + 5))" >"$dir/vm.log" 2>&1 &
		pid=$!
		wait_up "$V_URL" /health "$dir/vm.log" "$pid"
		url=$V_URL/api/v1/write
	fi
	t0=$(ticks "$pid")
	# shellcheck disable=SC2086
	"$BENCH" bench --url "$url" --series "$SERIES" --samples "$SAMPLES" $BENCH_ARGS >"$dir/bench.log" 2>&1 ||
		{ echo "bench against $who failed:" >&2; tail -5 "$dir/bench.log" >&2; return 1; }
	grep -q ' 0 failed samples' "$dir/bench.log" || { echo "bench against $who lost samples:" >&2; tail -3 "$dir/bench.log" >&2; return 1; }
	local out ingest
	ingest=$(($(ticks "$pid") - t0))
	out=$(settle)
	if [ "$who" = tessera ]; then
		curl -fsS -o /dev/null "$T_URL/debug/pprof/heap?gc=1"
		heap=$(curl -fsS "$T_URL/metrics" | awk '$1 == "go_memstats_heap_alloc_bytes" {printf "%d", $2}')
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	rm -rf "$dir/data"
	echo "$out ${heap:--} $ingest"
}

echo "series $SERIES x $SAMPLES samples; tessera $TESSERA, vm $VM; load before: $(cat /proc/loadavg)"
printf '%-5s %-8s %14s %10s %9s %14s %10s %10s %6s\n' round store vmrss_bytes B/series settle_s live_heap heapB/ser ingest_us load1
results=$work/results
: >"$results"
for r in $(seq 1 "$ROUNDS"); do
	order=("${stores[@]}")
	if [ $((r % 2)) = 0 ] && [ ${#stores[@]} = 2 ]; then order=("${stores[1]}" "${stores[0]}"); fi
	for who in "${order[@]}"; do
		# Not in a subshell: the trap must see the store's pid.
		run "$who" "$r" >"$work/run.out"
		read -r rb secs heap ingest <"$work/run.out"
		[ -n "${rb:-}" ] || { echo "no figure for $who round $r" >&2; exit 1; }
		hps=-
		[ "$heap" != - ] && hps=$((heap / SERIES))
		# ingest_us: the store's own CPU (utime+stime) during the bench, in
		# microseconds per sample written.
		ius=$(awk -v t="$ingest" -v hz="$HZ" -v n="$((SERIES * SAMPLES))" 'BEGIN {printf "%.3f", t / hz * 1e6 / n}')
		printf '%-5s %-8s %14s %10s %9s %14s %10s %10s %6s\n' "$r" "$who" "$rb" "$((rb / SERIES))" "$secs" "$heap" "$hps" \
			"$ius" "$(cut -d' ' -f1 /proc/loadavg)"
		echo "$who $((rb / SERIES))" >>"$results"
	done
done
med() { grep "^$1 " "$results" | awk '{print $2}' | sort -n | awk '{v[NR]=$1} END {if (NR) print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
mt=$(med tessera)
mv=$(med vm)
echo "median VmRSS bytes per series over $ROUNDS rounds: tessera ${mt:--}, vm ${mv:--}$( [ -n "$mt" ] && [ -n "$mv" ] && awk -v t="$mt" -v v="$mv" 'BEGIN {printf ", ratio %.2fx", t / v}')"
echo "load after: $(cat /proc/loadavg)"
