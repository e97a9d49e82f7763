#!/usr/bin/env bash
# steady-cpu.sh: node CPU per sample at steady state, Tessera binaries and
# VictoriaMetrics rotated round by round (issue 30 item 3).
#
# Each round starts every store in turn (the order rotates: the machine is
# shared, only interleaved runs compare), fresh in an empty temp dir, never
# two at once: a Tessera binary as the embedded default (storelib.sh
# node_yml), VictoriaMetrics single-node with only its data path and
# listen address. Each store first gets WARM samples of every series (the
# series are created, the caches filled), then the measured bench: the
# store's utime+stime (/proc/PID/stat) over `tessera bench --series SERIES
# --samples SAMPLES`, per sample written. The window opens once the
# store has settled after the warm-up and closes once it has settled
# after the bench (settle: two half seconds in a row under SETTLE_TICKS
# clock ticks each, at most 30 s): without it the window took in the
# warm-up's trailing work (a commit-log flush, a merge, a tick) a random
# number of times and left out the bench's, for every store alike.
# Tessera gets remote write
# PROTOCOL (1 or 2); VictoriaMetrics always 1.0 (it takes no 2.0). A
# binary given as N:BIN gets protocol N whatever PROTOCOL says, so that
# 1.0 and 2.0 are compared in one run (1:./tessera 2:./tessera).
#
# Usage:
#   scripts/steady-cpu.sh TESSERA_BIN [TESSERA_BIN...]
#   PROTOCOL=2 ROUNDS=6 scripts/steady-cpu.sh /tmp/base-tessera ./tessera
#   ROUNDS=6 scripts/steady-cpu.sh 1:./tessera 2:./tessera
#
# Environment: SERIES (10000), SAMPLES (360), WARM (20), ROUNDS (4),
# PROTOCOL (1), VM (/tmp/vm/victoria-metrics; VM= leaves it out), PORT
# (19660: Tessera HTTP, RPC +1, etcd +2/+3, VictoriaMetrics +5), BENCH
# (the tessera running the bench; default the last TESSERA_BIN),
# SETTLE_TICKS (2: 20 ms of CPU in half a second at 100 Hz), SETTLE (1;
# 0 measures from the warm-up's end to the bench's, as before settle).
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 TESSERA_BIN [TESSERA_BIN...]" >&2; exit 2; }
SERIES=${SERIES:-10000}
SAMPLES=${SAMPLES:-360}
WARM=${WARM:-20}
ROUNDS=${ROUNDS:-4}
PROTOCOL=${PROTOCOL:-1}
VM=${VM-/tmp/vm/victoria-metrics}
PORT=${PORT:-19660}
BENCH=${BENCH:-${!#}}
BENCH=${BENCH#[12]:}
HZ=$(getconf CLK_TCK)
SETTLE_TICKS=${SETTLE_TICKS:-2}
SETTLE=${SETTLE:-1}
stores=("$@")
[ -n "$VM" ] && stores+=(vm)
for b in "$@" "$BENCH" ${VM:+"$VM"}; do
	b=${b#[12]:}
	[ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done

work=$(mktemp -d /tmp/steady-cpu.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ticks, wait_up, node_yml
. "$(dirname "$0")/storelib.sh"

settle() { # settle PID: until two half seconds in a row each use < SETTLE_TICKS, at most 30 s
	local quiet=0 a b i
	[ "$SETTLE" = 1 ] || return 0
	a=$(ticks "$1")
	for i in $(seq 1 60); do
		sleep 0.5
		b=$(ticks "$1")
		if [ $((b - a)) -lt "$SETTLE_TICKS" ]; then quiet=$((quiet + 1)); else quiet=0; fi
		a=$b
		[ "$quiet" -ge 2 ] && return 0
	done
	echo "settle: pid $1 still busy after 30 s; measuring anyway" >&2
}

run() { # run STORE DIR -> prints node CPU us per measured sample
	local who=$1 dir=$2 url proto=$PROTOCOL now t0
	case $who in [12]:*) proto=${who%%:*} who=${who#[12]:} ;; esac
	mkdir -p "$dir"
	if [ "$who" = vm ]; then
		"$VM" -storageDataPath "$dir/data" -httpListenAddr "127.0.0.1:$((PORT + 5))" >"$dir/log" 2>&1 &
		pid=$!
		wait_up "http://127.0.0.1:$((PORT + 5))" /health "$dir/log" "$pid"
		url=http://127.0.0.1:$((PORT + 5))/api/v1/write
		proto=1
	else
		node_yml "$dir" "$PORT" "$SERIES" >"$dir/node.yml"
		"$who" node -f "$dir/node.yml" >"$dir/log" 2>&1 &
		pid=$!
		wait_up "http://127.0.0.1:$PORT" /ready "$dir/log" "$pid"
		url=http://127.0.0.1:$PORT
	fi
	# Both loads end before now, the measured one after the warm-up.
	now=$(($(date +%s) * 1000))
	"$BENCH" bench --url "$url" --series "$SERIES" --samples "$WARM" --protocol "$proto" \
		--start $((now - (WARM + SAMPLES) * 1000 - 20000)) >"$dir/warm.log" 2>&1 ||
		{ echo "warm-up against $who failed: $(tail -1 "$dir/warm.log")" >&2; return 1; }
	settle "$pid"
	t0=$(ticks "$pid")
	"$BENCH" bench --url "$url" --series "$SERIES" --samples "$SAMPLES" --protocol "$proto" \
		--start $((now - SAMPLES * 1000 - 10000)) >"$dir/bench.log" 2>&1 ||
		{ echo "bench against $who failed: $(tail -1 "$dir/bench.log")" >&2; return 1; }
	grep -q ' 0 failed samples' "$dir/bench.log" || { echo "bench against $who lost samples" >&2; return 1; }
	settle "$pid"
	awk -v t="$(($(ticks "$pid") - t0))" -v hz="$HZ" -v n="$((SERIES * SAMPLES))" 'BEGIN {printf "%.3f", t / hz * 1e6 / n}'
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	rm -rf "$dir"
}

echo "steady CPU: $SERIES series, $WARM warm-up + $SAMPLES measured samples each, Tessera remote write $PROTOCOL.0 (N:BIN: N.0); load before: $(cat /proc/loadavg)"
: >"$work/results"
for r in $(seq 1 "$ROUNDS"); do
	n=${#stores[@]}
	for k in $(seq 0 $((n - 1))); do
		who=${stores[$(((k + r - 1) % n))]}
		us=$(run "$who" "$work/run")
		echo "round $r  $who  $us us/sample  load1 $(cut -d' ' -f1 /proc/loadavg)"
		echo "$who $us" >>"$work/results"
	done
done
echo "medians (us/sample):"
for who in "${stores[@]}"; do
	grep -F "$who " "$work/results" | awk '{print $2}' | sort -n |
		awk -v w="$who" '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "  %s %.3f\n", w, m}'
done
echo "load after: $(cat /proc/loadavg)"
