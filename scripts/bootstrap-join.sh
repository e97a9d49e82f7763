#!/usr/bin/env bash
# bootstrap-join.sh: how fast a fourth node joins the three-node example
# (issue 18, part 4: peer bootstrap).
#
# For each binary given (default: one built from this checkout), and for
# ROUNDS rounds interleaved (A B A B ...: this machine is shared, so the
# load drifts and only interleaved pairs compare), it
#
#   1. starts the three-node RF 3 example (config/examples/three-node,
#      nodes 1-3), initialises the placement as its header says and loads
#      it through node 1 with `tessera bench` (BENCH_ARGS);
#   2. starts node 4 (config/examples/three-node/node4.yml), runs
#      `tessera placement add` for it and polls `placement get -o json`
#      until no shard is INITIALIZING or LEAVING (balanced);
#   3. reports add_to_bal, the seconds from the add to balanced (node 4
#      ready, then the placement checked: nothing INITIALIZING or
#      LEAVING), rounds_s, the time node 4's bootstrap rounds took (its
#      log's "bootstrap round finished" lines), what node 4 streamed
#      (samples_streamed, bytes_streamed from the same lines) and the
#      samples/s and MB/s of streamed bytes over rounds_s. add_to_bal
#      also holds the placement CLI's own start (seconds on a loaded box)
#      and node 4 seeing the new placement; where those seconds go:
#      cli_s (the add command, start to exit), to_round (the add's start
#      to node 4's "bootstrap starting") and tail_s (node 4's last round
#      finished to balanced seen). The round's own log line splits it
#      into streaming and marking (the mark-available CAS).
#
# Every port is shifted by PORT_OFFSET (default 20130, a multiple of 10)
# and every data dir is a fresh temp dir, removed at the end.
#
# Usage:
#   scripts/bootstrap-join.sh                          # this checkout, 3 rounds
#   ROUNDS=3 scripts/bootstrap-join.sh /tmp/base-tessera ./tessera
#
# Environment: ROUNDS (3), PORT_OFFSET (20130), BENCH_ARGS (the issue's
# workload: 10,000 series x 720 samples at 10 s), OUT_DIR (node 4's
# bootstrap log lines per run, default /tmp/bootstrap-join), CATCHUP_WAIT
# (0: seconds to wait after balanced for node 4's post-join catch-up line,
# kept in those logs; its time is not in add_to_bal).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
OFF=${PORT_OFFSET:-20130}
BENCH_ARGS=${BENCH_ARGS:---series 10000 --samples 720 --interval 10s}
OUT_DIR=${OUT_DIR:-/tmp/bootstrap-join}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

work=$(mktemp -d /tmp/bootstrap-join.XXXXXX)
pids=()
stop_all() {
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
	pids=()
}
cleanup() {
	stop_all
	rm -rf "$work"
}
trap cleanup EXIT

if [ $((OFF % 10)) -ne 0 ]; then
	echo "PORT_OFFSET must be a multiple of 10" >&2
	exit 2
fi

bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	echo "building tessera from $ROOT" >&2
	(cd "$ROOT" && go build -o "$work/tessera" ./cmd/tessera)
	bins=("$work/tessera")
fi

port() { echo $(($1 + OFF)); }

# wait_ready URL LOG PID: poll /ready for up to 120 s, failing at once if
# the node exited.
wait_ready() {
	local i
	for i in $(seq 1 1200); do
		if curl -fsS -o /dev/null "$1/ready" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$3" 2>/dev/null; then
			echo "node exited before it was ready: $1" >&2
			tail -5 "$2" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "not ready after 120 s: $1" >&2
	tail -5 "$2" >&2
	return 1
}

# config N DIR: node N's example config with every port shifted.
config() {
	local p4 p9 p237 p238
	p4=$(port 7200 | cut -c1-4)
	p9=$(port 9000 | cut -c1-4)
	p237=$(port 2370 | cut -c1-4)
	p238=$(port 2380 | cut -c1-4)
	sed -e "s#127.0.0.1:720\([1-4]\)#127.0.0.1:${p4}\1#g" \
		-e "s#127.0.0.1:900\([1-4]\)#127.0.0.1:${p9}\1#g" \
		-e "s#127.0.0.1:237\([1-3]\)#127.0.0.1:${p237}\1#g" \
		-e "s#127.0.0.1:238\([1-3]\)#127.0.0.1:${p238}\1#g" \
		-e "s#dataDir: .*#dataDir: $2/node$1#" \
		"$ROOT/config/examples/three-node/node$1.yml"
}

# moving BIN EP: how many shard copies are INITIALIZING or LEAVING.
moving() {
	"$1" placement --endpoints "$2" get -o json 2>/dev/null |
		python3 -c 'import json,sys
p=json.load(sys.stdin)
n=0
for i in p.get("instances") or []:
    for s in i.get("shards") or []:
        st=str(s.get("state","")).upper()
        if st in ("INITIALIZING","LEAVING","1","3"): n+=1
print(n)'
}

join() { # BIN DIR -> "seconds samples bytes"
	local bin=$1 dir=$2 i
	mkdir -p "$dir"
	for i in 1 2 3; do
		config "$i" "$dir" >"$dir/node$i.yml"
		"$bin" node -f "$dir/node$i.yml" >"$dir/node$i.log" 2>&1 &
		pids+=($!)
	done
	local ep="127.0.0.1:$(port 2371)"
	for i in $(seq 1 600); do
		if "$bin" placement --endpoints "$ep" init --rf 3 --shards 4096 \
			--instance "id=node1,group=rack1,endpoint=127.0.0.1:$(port 9001),http=127.0.0.1:$(port 7201)" \
			--instance "id=node2,group=rack2,endpoint=127.0.0.1:$(port 9002),http=127.0.0.1:$(port 7202)" \
			--instance "id=node3,group=rack3,endpoint=127.0.0.1:$(port 9003),http=127.0.0.1:$(port 7203)" \
			>"$dir/init.log" 2>&1; then
			break
		fi
		sleep 0.2
	done
	for i in 1 2 3; do
		wait_ready "http://127.0.0.1:$(port $((7200 + i)))" "$dir/node$i.log" "${pids[$((i - 1))]}"
	done
	# shellcheck disable=SC2086
	"$bin" bench --url "http://127.0.0.1:$(port 7201)" $BENCH_ARGS >"$dir/bench.log" 2>&1
	config 4 "$dir" >"$dir/node4.yml"
	"$bin" node -f "$dir/node4.yml" >"$dir/node4.log" 2>&1 &
	pids+=($!)
	wait_ready "http://127.0.0.1:$(port 7204)" "$dir/node4.log" "${pids[3]}"
	local t0 t1 n
	t0=$(date +%s.%N)
	"$bin" placement --endpoints "$ep" add \
		--instance "id=node4,group=rack1,endpoint=127.0.0.1:$(port 9004),http=127.0.0.1:$(port 7204)" >"$dir/add.log" 2>&1
	local tadd
	tadd=$(date +%s.%N)
	# Node 4 turns ready when its watch shows none of its shards
	# INITIALIZING: after the mark-available CAS, which drops the LEAVING
	# copies in the same transaction. curl polls cheaply; the placement
	# itself is then checked (a CLI run costs a second or more here).
	n=err
	for i in $(seq 1 6000); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$(port 7204)/ready" 2>/dev/null; then
			t1=$(date +%s.%N)
			n=$(moving "$bin" "$ep" || echo err)
			if [ "$n" = 0 ]; then
				break
			fi
		fi
		sleep 0.05
	done
	if [ "$n" != 0 ]; then
		echo "not balanced after 300 s (moving: $n)" >&2
		tail -5 "$dir/node4.log" >&2
		return 1
	fi
	if [ "${CATCHUP_WAIT:-0}" -gt 0 ]; then
		# node 4's post-join catch-up (bootstrap.catchUpAfter after its
		# CAS) logs its line once done: wait for it, up to CATCHUP_WAIT s.
		for _ in $(seq 1 $((CATCHUP_WAIT * 10))); do
			grep -q 'bootstrap catch-up done' "$dir/node4.log" && break
			sleep 0.1
		done
	fi
	stop_all
	mkdir -p "$OUT_DIR"
	{
		echo "placement add started $(date -u -d "@$t0" +%H:%M:%S.%N), returned $(date -u -d "@$tadd" +%H:%M:%S.%N), balanced seen $(date -u -d "@$t1" +%H:%M:%S.%N)"
		grep -E 'bootstrap (starting|round finished|catch-up done)|placement changed' "$dir/node4.log" || true
	} >"$OUT_DIR/$(basename "$dir").node4-rounds.log"
	# Where the seconds went: the add command itself, from the add to
	# node4's first round starting (the CLI plus the watch), and from its
	# last round's end to balanced seen (the mark-available CAS's watch
	# event, /ready, this script's poll).
	local phases
	phases=$(python3 - "$dir/node4.log" "$t0" "$tadd" "$t1" <<'PY'
import datetime, re, sys
log, t0, tadd, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def ts(line):
    m = re.match(r'time=(\S+)', line)
    return datetime.datetime.fromisoformat(m.group(1).replace('Z', '+00:00')).timestamp()
first = last = None
for line in open(log):
    if 'msg="bootstrap starting"' in line and first is None:
        first = ts(line)
    if 'msg="bootstrap round finished"' in line:
        last = ts(line)
if first is None or last is None:
    print("- - -")
else:
    print("%.2f %.2f %.2f" % (tadd - t0, first - t0, t1 - last))
PY
)
	local samples bytes
	samples=$(grep -o 'samples_streamed=[0-9]*' "$dir/node4.log" | tail -1 | cut -d= -f2)
	bytes=$(grep -o 'bytes_streamed=[0-9]*' "$dir/node4.log" | tail -1 | cut -d= -f2)
	local took
	took=$(grep 'bootstrap round finished' "$dir/node4.log" | grep -o 'took=[0-9.]*[mµ]*s' | cut -d= -f2 |
		awk '{v=$1; if (v ~ /ms$/) {sub(/ms$/, "", v); v /= 1000} else if (v ~ /µs$/) {sub(/µs$/, "", v); v /= 1e6} else {sub(/s$/, "", v)}; t += v} END {printf "%.2f", t}')
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') $took ${samples:-0} ${bytes:-0} $phases"
}

echo "load before: $(cat /proc/loadavg)"
printf '%-4s %-24s %9s %9s %6s %8s %6s %10s %12s %9s %7s %6s\n' round binary add_to_bal rounds_s cli_s to_round tail_s samples samples_per_s MB_per_s MB load1
for r in $(seq 1 "$ROUNDS"); do
	for bin in "${bins[@]}"; do
		d="$work/r$r-$(basename "$bin")"
		read -r secs took samples bytes cli to_round tail < <(join "$bin" "$d")
		load=$(cut -d' ' -f1 /proc/loadavg)
		awk -v r="$r" -v b="$(basename "$bin")" -v s="$secs" -v k="$took" -v n="$samples" -v by="$bytes" -v l="$load" \
			-v c="$cli" -v tr="$to_round" -v t="$tail" \
			'BEGIN {printf "%-4s %-24s %9s %9s %6s %8s %6s %10s %12.0f %9.2f %7.1f %6s\n", r, b, s, k, c, tr, t, n, n / k, by / k / 1e6, by / 1e6, l}'
		rm -rf "$d"
	done
done
echo "load after: $(cat /proc/loadavg)"
