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
#   5. (QUERY_ROUNDS > 0, default 3) times instant queries over every
#      series at the last sample's time, each QUERY_ROUNDS times (curl's
#      time_total; the first and the best are printed, with the store's
#      CPU over all rounds): `count by (job) ({job="bench"})` (the
#      `count by (job) (up)` of a dashboard's overview, over all series)
#      and `sum by (instance) (rate({job="bench"}[5m]))`. The count's
#      answer is checked (SERIES). VictoriaMetrics runs with
#      -search.disableCache and gets nocache=1, so every run evaluates;
#      its per-query limits (-search.maxUniqueTimeseries,
#      -search.maxQueryDuration) are raised to take all series, as
#      node_yml raises Tessera's (limits.maxFetchedSeriesPerQuery);
#   6. (STEADY_SAMPLES > 0, default 0) steady writes to the same series:
#      `tessera bench --samples STEADY_SAMPLES` continuing after the first
#      load's last sample, VmRSS read every 10 s meanwhile; prints the
#      store's CPU per steady sample, VmRSS when the phase started, its
#      highest and its last reading, and for Tessera the live heap after
#      a forced collection at the end.
#
# At the end: the median bytes per series of each store and the ratio.
#
# Usage:
#   scripts/mem-per-series.sh TESSERA_BIN [VM_BIN]
#   ROUNDS=3 scripts/mem-per-series.sh /tmp/base-tessera /tmp/vm/victoria-metrics
#   ONLY=tessera scripts/mem-per-series.sh ./tessera   # no VictoriaMetrics
#
# Ten million series (issue 30), run once, with 10 steady samples a series:
#   SERIES=10000000 ROUNDS=1 STEADY_SAMPLES=10 scripts/mem-per-series.sh ./tessera /tmp/vm/victoria-metrics
#
# Environment: SERIES (1000000), SAMPLES (4), ROUNDS (2), QUERY_ROUNDS (3),
# STEADY_SAMPLES (0), SETTLE (30),
# SETTLE_MAX (180), PORT (19640: Tessera HTTP; RPC +1, etcd +2/+3,
# VictoriaMetrics +5), BENCH (the tessera that runs the bench; default
# TESSERA_BIN), BENCH_ARGS (extra bench flags), T_BENCH_ARGS (extra bench
# flags for Tessera only: `--protocol 2`, as VictoriaMetrics takes remote
# write 1.0 only), ONLY (tessera|vm), KEEP=1 keeps the temp dir,
# VM_ARGS (extra VictoriaMetrics flags), MIN_AVAIL_MB (1024; 0: off): a
# store is killed, and the run fails saying so, when the machine's
# MemAvailable drops under it, so that a 10 M-series run cannot push the
# machine into swap or the OOM killer and take other work with it.
#
# Node CPU per sample at 10 k series steady state (issue 30 item 3), the
# ingest_us column, interleaved rounds:
#   SERIES=10000 SAMPLES=360 ROUNDS=6 QUERY_ROUNDS=0 SETTLE=0 SETTLE_MAX=0 scripts/mem-per-series.sh ./tessera
#   ... T_BENCH_ARGS='--protocol 2' ...   # Tessera on remote write 2.0
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
T_BENCH_ARGS=${T_BENCH_ARGS:-}
ONLY=${ONLY:-}
QUERY_ROUNDS=${QUERY_ROUNDS:-3}
STEADY_SAMPLES=${STEADY_SAMPLES:-0}
KEEP=${KEEP:-0}
VM_ARGS=${VM_ARGS:-}
MIN_AVAIL_MB=${MIN_AVAIL_MB:-1024}
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

# rss PID: VmRSS in bytes. Printed with %.0f: awk prints a product past
# 2^31 as 4.64423e+09 and mawk's %d stops at 2^31-1, both of which a
# 10 M-series node's figures passed.
rss() { awk '/^VmRSS:/ {printf "%.0f\n", $2 * 1024}' "/proc/$1/status"; }

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

# live_heap: Tessera's live heap right after a forced collection.
live_heap() {
	curl -fsS -o /dev/null "$T_URL/debug/pprof/heap?gc=1"
	curl -fsS "$T_URL/metrics" | awk '$1 == "go_memstats_heap_alloc_bytes" {printf "%.0f", $2}'
}

# queries STORE BASE_URL TIME_MS: times each query QUERY_ROUNDS times,
# printing one line a query: store, name, first s, best s, store CPU s
# over the rounds, and the answer's size.
queries() {
	local who=$1 base=$2 t q name r out first best t0 cpu answer
	t=$(awk -v ms="$3" 'BEGIN {printf "%.3f", ms / 1000}')
	for name in count rate; do
		case $name in
		count) q='count by (job) ({job="bench"})' ;;
		rate) q='sum by (instance) (rate({job="bench"}[5m]))' ;;
		esac
		first="" best="" t0=$(ticks "$pid")
		for r in $(seq 1 "$QUERY_ROUNDS"); do
			out=$(curl -sS -o "$work/answer.json" -w '%{http_code} %{time_total}' --max-time 900 "$base/api/v1/query" \
				--data-urlencode "query=$q" --data-urlencode "time=$t" --data-urlencode nocache=1) || out="curl-failed 0"
			[ "${out%% *}" = 200 ] || { echo "$who $name: HTTP ${out%% *}: $(head -c 300 "$work/answer.json")" >&2; break; }
			[ -z "$first" ] && first=${out#* }
			best=$(awk -v a="${best:-1e9}" -v b="${out#* }" 'BEGIN {print (b < a) ? b : a}')
		done
		cpu=$(awk -v t="$(($(ticks "$pid") - t0))" -v hz="$HZ" 'BEGIN {printf "%.2f", t / hz}')
		case $name in
		count) answer=$(jq -r '[.data.result[].value[1] | tonumber] | add // 0' "$work/answer.json" 2>/dev/null || echo -) ;;
		rate) answer=$(jq -r '.data.result | length' "$work/answer.json" 2>/dev/null || echo -) ;;
		esac
		echo "$who $name ${first:--} ${best:--} $cpu $answer"
	done
}

# steady STORE DIR WRITE_URL START_MS: STEADY_SAMPLES more samples of
# every series from START_MS, VmRSS read every 10 s meanwhile; prints
# store, samples, wall s, CPU us a sample, VmRSS at the start, highest,
# last, and Tessera's live heap after (or -).
steady() {
	local who=$1 dir=$2 url=$3 from=$4 t0 w0 rss0 sampler heap=- n
	n=$((SERIES * STEADY_SAMPLES))
	rss0=$(rss "$pid")
	: >"$dir/steady.rss"
	(while kill -0 "$pid" 2>/dev/null; do rss "$pid" >>"$dir/steady.rss"; sleep 10; done) &
	sampler=$!
	t0=$(ticks "$pid") w0=$(date +%s)
	# shellcheck disable=SC2086
	"$BENCH" bench --url "$url" --series "$SERIES" --samples "$STEADY_SAMPLES" --start "$from" $BENCH_ARGS >"$dir/steady.log" 2>&1 ||
		{ echo "steady bench against $who failed:" >&2; tail -5 "$dir/steady.log" >&2; }
	local ticks1 w1
	ticks1=$(($(ticks "$pid") - t0)) w1=$(($(date +%s) - w0))
	rss "$pid" >>"$dir/steady.rss"
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	grep -q ' 0 failed samples' "$dir/steady.log" || echo "steady bench against $who lost samples: $(tail -1 "$dir/steady.log")" >&2
	[ "$who" = tessera ] && heap=$(live_heap)
	echo "$who $n $w1 $(awk -v t="$ticks1" -v hz="$HZ" -v n="$n" 'BEGIN {printf "%.3f", t / hz * 1e6 / n}') $rss0 \
$(sort -n "$dir/steady.rss" | tail -1) $(tail -1 "$dir/steady.rss") $heap"
}

# guard PID WHO DIR: kill PID when MemAvailable drops under MIN_AVAIL_MB
# (checked every second while PID lives), leaving DIR/guard-tripped.
guard() {
	local avail
	[ "$MIN_AVAIL_MB" -gt 0 ] || return 0
	while kill -0 "$1" 2>/dev/null; do
		avail=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1024}' /proc/meminfo)
		if [ "$avail" -lt "$MIN_AVAIL_MB" ]; then
			echo "memory guard: MemAvailable ${avail} MB < MIN_AVAIL_MB ${MIN_AVAIL_MB} with $2 at VmRSS $(rss "$1") bytes: killed it (lower SERIES, or set MIN_AVAIL_MB=0 to run on regardless)" >&2
			touch "$3/guard-tripped"
			kill -9 "$1" 2>/dev/null || true
			return 0
		fi
		sleep 1
	done
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
		"$VM" -storageDataPath "$dir/data" -httpListenAddr "127.0.0.1:$((PORT + 5))" \
			-search.disableCache -search.maxUniqueTimeseries "$((SERIES * 2))" -search.maxQueryDuration 10m $VM_ARGS \
			>"$dir/vm.log" 2>&1 &
		pid=$!
		wait_up "$V_URL" /health "$dir/vm.log" "$pid"
		url=$V_URL/api/v1/write
	fi
	guard "$pid" "$who" "$dir" >/dev/null &
	local args=$BENCH_ARGS
	[ "$who" = tessera ] && args="$args $T_BENCH_ARGS"
	t0=$(ticks "$pid")
	# shellcheck disable=SC2086
	"$BENCH" bench --url "$url" --series "$SERIES" --samples "$SAMPLES" $args >"$dir/bench.log" 2>&1 ||
		{ echo "bench against $who failed:" >&2; tail -5 "$dir/bench.log" >&2; return 1; }
	grep -q ' 0 failed samples' "$dir/bench.log" || { echo "bench against $who lost samples:" >&2; tail -3 "$dir/bench.log" >&2; return 1; }
	local out ingest
	ingest=$(($(ticks "$pid") - t0))
	out=$(settle)
	if [ "$who" = tessera ]; then
		heap=$(live_heap)
	fi
	local base=$T_URL start last
	[ "$who" = vm ] && base=$V_URL
	start=$(awk '/^bench: / {for (i = 1; i < NF; i++) if ($i == "start") {sub(",", "", $(i+1)); print $(i+1)}}' "$dir/bench.log")
	last=$((start + (SAMPLES - 1) * 1000))
	if [ "$QUERY_ROUNDS" -gt 0 ]; then
		queries "$who" "$base" "$last" >>"$work/queries"
	fi
	if [ "$STEADY_SAMPLES" -gt 0 ]; then
		steady "$who" "$dir" "$url" "$((last + 1000))" >>"$work/steady"
	fi
	[ ! -e "$dir/guard-tripped" ] || { echo "$who was killed by the memory guard" >&2; return 1; }
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
: >"$work/queries"
: >"$work/steady"
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
med() { { grep "^$1 " "$results" || true; } | awk '{print $2}' | sort -n | awk '{v[NR]=$1} END {if (NR) print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
mt=$(med tessera)
mv=$(med vm)
echo "median VmRSS bytes per series over $ROUNDS rounds: tessera ${mt:--}, vm ${mv:--}$( [ -n "$mt" ] && [ -n "$mv" ] && awk -v t="$mt" -v v="$mv" 'BEGIN {printf ", ratio %.2fx", t / v}')"
if [ -s "$work/queries" ]; then
	echo "queries over all $SERIES series at the last sample (instant, $QUERY_ROUNDS runs each; seconds):"
	printf '%-8s %-6s %10s %10s %10s %12s\n' store query first best cpu_s answer
	while read -r a b c d e f; do printf '%-8s %-6s %10s %10s %10s %12s\n' "$a" "$b" "$c" "$d" "$e" "$f"; done <"$work/queries"
fi
if [ -s "$work/steady" ]; then
	echo "steady writes, $STEADY_SAMPLES samples of every series:"
	printf '%-8s %12s %7s %12s %14s %14s %14s %14s\n' store samples wall_s us/sample rss_start rss_max rss_end live_heap
	while read -r a b c d e f g h; do printf '%-8s %12s %7s %12s %14s %14s %14s %14s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"; done <"$work/steady"
fi
echo "load after: $(cat /proc/loadavg)"
