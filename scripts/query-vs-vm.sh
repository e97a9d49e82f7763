#!/usr/bin/env bash
# query-vs-vm.sh: Grafana-style range queries over node_exporter data,
# Tessera next to VictoriaMetrics on the same machine and data (issue 18).
#
#   1. starts a fresh Tessera node (the embedded default: own etcd, RF 1,
#      autoInit, only its ports changed) and a fresh VictoriaMetrics
#      single-node, each in an empty temp dir;
#   2. loads the same data into both through remote write:
#      `tessera bench --workload nodeexporter --hosts HOSTS` (~125 series a
#      host, 30 min at 10 s, ending about two minutes ago), VictoriaMetrics
#      on /api/v1/write with the --start Tessera's load printed;
#   3. waits until both hold it all: VictoriaMetrics after
#      /internal/force_flush, each until sum(count_over_time({job="node"}))
#      at the end of the data is every sample written;
#   4. runs `tessera bench queries` (the 11 queries as GET
#      /api/v1/query_range at a 15 s step with Accept-Encoding: gzip)
#      ROUNDS times against each, alternating (T V, V T, ...: this machine
#      is shared, the load drifts), reading each server's CPU (utime+stime
#      from /proc/PID/stat) around each run;
#   5. prints per query the best time of each, the ratio Tessera/VM, the
#      geometric means, the CPU seconds each server spent per round, and
#      (COMPARE=1) how the two answers compare point by point.
#
# VictoriaMetrics runs with -search.disableCache: with its rollup result
# cache every run after the first would be served from the cache, which
# times the cache, not the query (Tessera has none). VM_CACHE=1 keeps the
# cache for a second opinion.
#
# Usage:
#   scripts/query-vs-vm.sh TESSERA_BIN [VM_BIN]
#   ROUNDS=5 HOSTS=800 scripts/query-vs-vm.sh /tmp/base-tessera /tmp/vm/victoria-metrics
#
# TESSERA_BIN is the node measured; the load and the queries are run by
# BENCH (default TESSERA_BIN; give a newer tessera when TESSERA_BIN is an
# older build without `bench queries`).
#
# Environment: HOSTS (800), ROUNDS (3), PORT (19620: Tessera HTTP; RPC
# +1, etcd +2/+3, VictoriaMetrics +5), BENCH, COMPARE (1), VM_CACHE (0),
# KEEP=1 keeps the temp dir (logs, each run's table).
set -euo pipefail

TESSERA=${1:?usage: $0 TESSERA_BIN [VM_BIN]}
VM=${2:-/tmp/vm/victoria-metrics}
BENCH=${BENCH:-$TESSERA}
HOSTS=${HOSTS:-800}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-19620}
COMPARE=${COMPARE:-1}
VM_CACHE=${VM_CACHE:-0}
KEEP=${KEEP:-0}
HZ=$(getconf CLK_TCK)
T_URL=http://127.0.0.1:$PORT
V_URL=http://127.0.0.1:$((PORT + 5))

for b in "$TESSERA" "$VM" "$BENCH"; do
	[ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done
"$BENCH" bench queries --help >/dev/null 2>&1 || { echo "$BENCH has no 'bench queries': set BENCH to a newer tessera" >&2; exit 2; }

work=$(mktemp -d /tmp/query-vs-vm.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
	if [ "$KEEP" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ticks and wait_up
. "$(dirname "$0")/storelib.sh"

# instant URL QUERY TIME: the scalar value of an instant query's first
# result, or empty.
instant() {
	curl -fsS "$1/api/v1/query" --data-urlencode "query=$2" --data-urlencode "time=$3" --data-urlencode nocache=1 2>/dev/null |
		jq -r '.data.result[0].value[1] // empty' 2>/dev/null || true
}

# wait_for URL QUERY WANT END NAME: until the store's answer to the
# instant query at END is WANT, for up to 10 minutes; VictoriaMetrics is
# asked to flush its in-memory buffers before each try.
wait_for() {
	local i got=""
	for i in $(seq 1 600); do
		[ "$5" = vm ] && { curl -fsS -o /dev/null "$1/internal/force_flush" 2>/dev/null || true; }
		got=$(instant "$1" "$2" "$4")
		[ "$got" = "$3" ] && return 0
		sleep 1
	done
	echo "$5 answers $got to $2, want $3, after 10 minutes" >&2
	return 1
}

mkdir -p "$work/tessera" "$work/vm"
node_yml "$work/tessera" "$PORT" >"$work/tessera/node.yml"
"$TESSERA" node -f "$work/tessera/node.yml" >"$work/tessera/node.log" 2>&1 &
pids+=($!)
tpid=$!
vm_flags=(-storageDataPath "$work/vm/data" -httpListenAddr "127.0.0.1:$((PORT + 5))")
[ "$VM_CACHE" = 1 ] || vm_flags+=(-search.disableCache)
"$VM" "${vm_flags[@]}" >"$work/vm/vm.log" 2>&1 &
pids+=($!)
vpid=$!
wait_up "$T_URL" /ready "$work/tessera/node.log" "$tpid"
wait_up "$V_URL" /health "$work/vm/vm.log" "$vpid"

echo "load before loading: $(cat /proc/loadavg)"
"$BENCH" bench --workload nodeexporter --hosts "$HOSTS" --url "$T_URL" | tee "$work/load-tessera.log"
start=$(sed -n 's/.*--start \([0-9]*\).*/\1/p' "$work/load-tessera.log")
series=$(awk '/^write: [0-9]+ samples of/ {print $5}' "$work/load-tessera.log")
[ -n "$start" ] && [ -n "$series" ] || { echo "could not read the start and samples from the load" >&2; exit 1; }
"$BENCH" bench --workload nodeexporter --hosts "$HOSTS" --start "$start" --url "$V_URL/api/v1/write" | tee "$work/load-vm.log"
end=$(((start + 30 * 60 * 1000 + 10000) / 1000 + 15))
# Tessera flushes a 2 h block (default) to filesets once bufferPast (10 m)
# has passed after its end: if the data crosses a block boundary, that
# flush may come during the rounds, and its CPU is counted and its reads
# change under the queries (seen at 08:10 UTC: Tessera's CPU per round
# tripled). Say so, so that such a run is repeated rather than quoted.
block=$((2 * 3600))
if [ $((start / 1000 / block)) != $((end / block)) ]; then
	flush=$(((end / block) * block + 600))
	echo "WARNING: the data crosses the block boundary at $(date -u -d "@$((flush - 600))" +%H:%M) UTC;" \
		"Tessera flushes that block from $(date -u -d "@$flush" +%H:%M) UTC: rounds after it are not comparable" >&2
fi
# Every series, in both; and the samples of the largest metric (a sum
# over all of them would need the name that count_over_time drops, and
# the names would then collide) as many in VictoriaMetrics as in Tessera,
# whose write acknowledged them durably.
wait_for "$T_URL" 'count(last_over_time({job="node"}[1h]))' "$series" "$end" tessera
wait_for "$V_URL" 'count(last_over_time({job="node"}[1h]))' "$series" "$end" vm
cpu_q='sum(count_over_time(node_cpu_seconds_total[1h]))'
cpu_samples=$(instant "$T_URL" "$cpu_q" "$end")
wait_for "$V_URL" "$cpu_q" "$cpu_samples" "$end" vm
echo "both hold $series series, $cpu_samples node_cpu_seconds_total samples (start $start)"

res="$work/results"
: >"$res"
for r in $(seq 1 "$ROUNDS"); do
	order="tessera vm"
	[ $((r % 2)) = 0 ] && order="vm tessera"
	for who in $order; do
		if [ "$who" = tessera ]; then url=$T_URL pid=$tpid; else url=$V_URL pid=$vpid; fi
		t0=$(ticks "$pid")
		"$BENCH" bench queries --url "$url" --start "$start" --rounds 1 >"$work/q-$who-$r.txt"
		t1=$(ticks "$pid")
		load=$(cut -d' ' -f1 /proc/loadavg)
		geo=$(awk '$1 == "geomean" {print $2}' "$work/q-$who-$r.txt")
		printf 'round %s %-8s geomean %8s ms, server cpu %6.2f s, load1 %s\n' "$r" "$who" "$geo" \
			"$(awk -v t="$((t1 - t0))" -v hz="$HZ" 'BEGIN {print t / hz}')" "$load"
		echo "cpu $who $r $((t1 - t0))" >>"$res"
		# query rows: name best_ms series
		awk -v who="$who" -v r="$r" 'f && $1 != "geomean" {print "q", who, r, $1, $2, $3} $1 == "query" {f = 1}' \
			"$work/q-$who-$r.txt" >>"$res"
	done
done

echo
echo "best of $ROUNDS per query (ms), Tessera $TESSERA vs VictoriaMetrics $VM, $HOSTS hosts:"
awk -v hz="$HZ" '
$1 == "q" {
	k = $2 SUBSEP $4
	if (!(k in best) || $5 < best[k]) best[k] = $5
	series[k] = $6
	if (!($4 in seen)) { seen[$4] = 1; names[++n] = $4 }
}
$1 == "cpu" { cpu[$2] += $4; rounds[$2]++ }
END {
	printf "%-20s %12s %12s %8s %9s %9s\n", "query", "tessera_ms", "vm_ms", "ratio", "series_t", "series_v"
	lt = 0; lv = 0
	for (i = 1; i <= n; i++) {
		q = names[i]; t = best["tessera" SUBSEP q]; v = best["vm" SUBSEP q]
		printf "%-20s %12.2f %12.2f %7.2fx %9d %9d\n", q, t, v, t / v, series["tessera" SUBSEP q], series["vm" SUBSEP q]
		lt += log(t); lv += log(v)
	}
	gt = exp(lt / n); gv = exp(lv / n)
	printf "%-20s %12.2f %12.2f %7.2fx\n", "geomean", gt, gv, gt / gv
	printf "server CPU per round of 11 queries: tessera %.2f s, vm %.2f s (mean of %d rounds)\n",
		cpu["tessera"] / hz / rounds["tessera"], cpu["vm"] / hz / rounds["vm"], rounds["tessera"]
}' "$res"
echo "load after: $(cat /proc/loadavg)"

if [ "$COMPARE" = 1 ]; then
	echo
	"$BENCH" bench queries --url "$T_URL" --start "$start" --rounds 1 --compare "$V_URL" | sed -n '/^compare:/,$p'
fi
