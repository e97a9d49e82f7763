#!/usr/bin/env bash
# steady-mem.sh: a node's memory under steady writes for DURATION seconds
# (issue 30 item 1: "the head's memory under steady writes for 30
# minutes: no growth past the GC headroom").
#
#   1. a fresh one-node Tessera on its embedded defaults (storelib.sh
#      node_yml) in an empty temp dir;
#   2. SERIES series created with one sample each (`tessera bench
#      --samples 1`);
#   3. every INTERVAL seconds of wall time, one more sample of every
#      series, at the next INTERVAL on the data's own clock (`--start`),
#      so the data keeps the pace a scrape would, until DURATION has
#      passed (a bench longer than INTERVAL delays the next one: the
#      rounds are counted, not assumed);
#   4. once a minute and at the end, one line: elapsed seconds, samples
#      written, the node's VmRSS, its Go heap in use
#      (go_memstats_heap_inuse_bytes) and tessera_storage_bytes_in_memory
#      (the encoded samples the head holds: what memory may grow by as
#      the open block fills; updated by the storage tick).
#
# The summary compares VmRSS's growth from the first steady minute to the
# end with the growth of the encoded data in memory over the same time:
# a head that leaks grows faster than its data.
#
# Usage:
#   scripts/steady-mem.sh TESSERA_BIN
#   SERIES=1000000 DURATION=1800 INTERVAL=10 scripts/steady-mem.sh /tmp/tessera
#
# Environment: SERIES (1000000), DURATION (1800), INTERVAL (10), PORT
# (35100: HTTP; RPC +1, etcd +2/+3), KEEP=1 keeps the temp dir.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 TESSERA_BIN" >&2; exit 2; }
BIN=$1
SERIES=${SERIES:-1000000}
DURATION=${DURATION:-1800}
INTERVAL=${INTERVAL:-10}
PORT=${PORT:-35100}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=storelib.sh
. "$here/storelib.sh"

work=$(mktemp -d /tmp/steady-mem.XXXXXX)
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

url=http://127.0.0.1:$PORT
node_yml "$work" "$PORT" "$SERIES" >"$work/node.yml"
"$BIN" node -f "$work/node.yml" >"$work/node.log" 2>&1 &
pid=$!
wait_up "$url" /ready "$work/node.log" "$pid"

metric() { # metric NAME: its value on /metrics, or -
	curl -fsS "$url/metrics" 2>/dev/null | awk -v n="$1" '$1 == n {printf "%.0f", $2; found=1} END {if (!found) print "-"}'
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }

step_ms=$((INTERVAL * 1000))
t0=$(( $(date +%s%3N) - step_ms ))
"$BIN" bench --url "$url" --series "$SERIES" --samples 1 --interval "${INTERVAL}s" --start "$t0" >"$work/create.log" 2>&1 ||
	{ echo "create failed:" >&2; tail -5 "$work/create.log" >&2; exit 1; }
grep -q ' 0 failed samples' "$work/create.log" || { echo "create lost samples:" >&2; tail -3 "$work/create.log" >&2; exit 1; }

printf '%8s %12s %10s %12s %14s\n' elapsed_s samples rss_mb heap_inuse_mb data_in_mem_mb
line() {
	local inuse data
	inuse=$(metric go_memstats_heap_inuse_bytes) data=$(metric tessera_storage_bytes_in_memory)
	printf '%8d %12d %10d %12s %14s\n' "$1" "$2" "$(( $(rss_kb) / 1024 ))" \
		"$([ "$inuse" = - ] && echo - || echo $((inuse / 1048576)))" \
		"$([ "$data" = - ] && echo - || echo $((data / 1048576)))"
}

begin=$(date +%s)
k=1 written=$SERIES next_line=0
first_rss="" first_data=""
while :; do
	now=$(date +%s)
	elapsed=$((now - begin))
	[ "$elapsed" -ge "$DURATION" ] && break
	if [ "$elapsed" -ge "$next_line" ]; then
		line "$elapsed" "$written" | tee -a "$work/lines"
		if [ -z "$first_rss" ] && [ "$elapsed" -ge 60 ]; then
			first_rss=$(rss_kb) first_data=$(metric tessera_storage_bytes_in_memory)
		fi
		next_line=$((next_line + 60))
	fi
	round_start=$(date +%s%3N)
	"$BIN" bench --url "$url" --series "$SERIES" --samples 1 --interval "${INTERVAL}s" --start $((t0 + k * step_ms)) >"$work/bench.log" 2>&1 ||
		{ echo "bench failed at round $k:" >&2; tail -5 "$work/bench.log" >&2; exit 1; }
	grep -q ' 0 failed samples' "$work/bench.log" || { echo "bench lost samples at round $k:" >&2; tail -3 "$work/bench.log" >&2; exit 1; }
	k=$((k + 1)) written=$((written + SERIES))
	left=$(( step_ms - ($(date +%s%3N) - round_start) ))
	[ "$left" -gt 0 ] && sleep "$(awk -v l="$left" 'BEGIN {printf "%.3f", l / 1000}')"
done
line "$(($(date +%s) - begin))" "$written" | tee -a "$work/lines"
end_rss=$(rss_kb) end_data=$(metric tessera_storage_bytes_in_memory)
max_rss=$(awk '$3 > m {m = $3} END {print m}' "$work/lines")
echo "rounds $((k - 1)) of $((DURATION / INTERVAL)) scheduled; samples written $written"
if [ -n "$first_rss" ] && [ "$first_data" != - ] && [ "$end_data" != - ]; then
	echo "from the first steady minute to the end: VmRSS $((first_rss / 1024)) -> $((end_rss / 1024)) MB ($(( (end_rss - first_rss) / 1024 )) MB), highest ${max_rss} MB; encoded data in memory $((first_data / 1048576)) -> $((end_data / 1048576)) MB ($(( (end_data - first_data) / 1048576 )) MB)"
fi
