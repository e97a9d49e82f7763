#!/usr/bin/env bash
# cpu-per-sample.sh: what replication costs in CPU (issue 13).
#
# For each binary given (default: one built from this checkout), and for
# ROUNDS rounds interleaved (A B A B ...: this machine is shared, so the
# load drifts and only interleaved pairs compare), it
#
#   1. starts one node with the embedded defaults (own etcd, RF 1,
#      autoInit) in an empty temp dir, runs `tessera bench` against it and
#      reads the node's CPU (utime+stime from /proc/PID/stat) before and
#      after the bench;
#   2. starts the three-node RF 3 example (config/examples/three-node,
#      nodes 1-3, placement initialised as its header says), feeds the same
#      bench through node 1 and reads all three nodes' CPU the same way.
#
# Every port is shifted by PORT_OFFSET (default +21130) so nothing collides
# with the examples' usual ports or with other tests on the machine: all
# stay below 32768, where Linux does not hand out ephemeral ports (which
# other tests' listeners on port 0 and every outgoing connection take).
# Every data dir is a fresh temp dir, removed at the end.
#
# It prints one line per run and, at the end, the medians per binary:
#   us/sample = CPU ticks * (1e6 / CLK_TCK) / samples written
#   ratio     = cluster us/sample (all three nodes) / single us/sample
#
# Usage:
#   scripts/cpu-per-sample.sh                      # this checkout, 3 rounds
#   ROUNDS=7 scripts/cpu-per-sample.sh /tmp/base-tessera ./tessera
#   PROFILE=1 scripts/cpu-per-sample.sh            # also pprof each cluster node
#
# With PROFILE=1 each cluster run also fetches a CPU profile of each node
# (/debug/pprof/profile, PROFILE_SECONDS long, started with the bench) into
# $OUT_DIR (default /tmp/cpu-per-sample); `go tool pprof -top BIN FILE`
# reads them. The profile costs a little CPU of its own: do not mix
# PROFILE=1 runs into a measurement.
#
# Environment: ROUNDS (3), PORT_OFFSET (21130, a multiple of 10), BENCH_ARGS (the issue's
# workload), PROFILE (0), PROFILE_SECONDS (8), OUT_DIR.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
OFF=${PORT_OFFSET:-21130}
BENCH_ARGS=${BENCH_ARGS:---series 10000 --samples 360 --interval 1s --batch 5000 --concurrency 4}
PROFILE=${PROFILE:-0}
PROFILE_SECONDS=${PROFILE_SECONDS:-8}
OUT_DIR=${OUT_DIR:-/tmp/cpu-per-sample}
HZ=$(getconf CLK_TCK)
ROOT=$(cd "$(dirname "$0")/.." && pwd)

work=$(mktemp -d /tmp/cpu-per-sample.XXXXXX)
mkdir -p "$OUT_DIR"
pids=()
cleanup() {
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	echo "building tessera from $ROOT" >&2
	(cd "$ROOT" && go build -o "$work/tessera" ./cmd/tessera)
	bins=("$work/tessera")
fi

# ticks PID: utime+stime of the process, in clock ticks. The fields after
# the command name (which is in parentheses) start at field 3, so utime and
# stime (fields 14 and 15) are the 12th and 13th after the ')'.
ticks() {
	local s
	s=$(cat "/proc/$1/stat")
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}

# wait_ready URL LOG PID: poll /ready for up to 120 s, failing at once if
# the node exited; on failure show the end of the node's log (a port
# taken by another process shows there).
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

stop_all() {
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
	pids=()
}

# port N: N shifted by the offset.
port() { echo $(($1 + OFF)); }

# bench_run BIN URL LOG: runs the bench, prints "samples samples_per_s".
bench_run() {
	# shellcheck disable=SC2086
	"$1" bench --url "$2" $BENCH_ARGS >"$3" 2>&1
	awk '/^write: [0-9]+ samples in/ {print $2, $6}' "$3"
}

single() { # BIN DIR -> "samples sps ticks"
	local bin=$1 dir=$2
	mkdir -p "$dir"
	cat >"$dir/node.yml" <<EOF
id: node1
dataDir: $dir/data
http:
  listen: 127.0.0.1:$(port 7200)
rpc:
  listen: 127.0.0.1:$(port 9000)
cluster:
  autoInit: true
etcd:
  embedded:
    enabled: true
    clientURL: http://127.0.0.1:$(port 2379)
    peerURL: http://127.0.0.1:$(port 2380)
EOF
	"$bin" node -f "$dir/node.yml" >"$dir/node.log" 2>&1 &
	pids=($!)
	wait_ready "http://127.0.0.1:$(port 7200)" "$dir/node.log" "${pids[0]}"
	local t0 t1 out
	t0=$(ticks "${pids[0]}")
	out=$(bench_run "$bin" "http://127.0.0.1:$(port 7200)" "$dir/bench.log")
	t1=$(ticks "${pids[0]}")
	stop_all
	echo "$out $((t1 - t0))"
}

cluster() { # BIN DIR TAG -> "samples sps t1 t2 t3"
	local bin=$1 dir=$2 tag=$3 i
	mkdir -p "$dir"
	for i in 1 2 3; do
		sed -e "s#127.0.0.1:7201#127.0.0.1:$(port 7201)#; s#127.0.0.1:7202#127.0.0.1:$(port 7202)#; s#127.0.0.1:7203#127.0.0.1:$(port 7203)#" \
			-e "s#127.0.0.1:900\([1-3]\)#127.0.0.1:$(port 9000 | cut -c1-4)\1#g" \
			-e "s#127.0.0.1:237\([1-3]\)#127.0.0.1:$(port 2370 | cut -c1-4)\1#g" \
			-e "s#127.0.0.1:238\([1-3]\)#127.0.0.1:$(port 2380 | cut -c1-4)\1#g" \
			-e "s#dataDir: .*#dataDir: $dir/node$i#" \
			"$ROOT/config/examples/three-node/node$i.yml" >"$dir/node$i.yml"
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
	local a=() b=() out prof=()
	for i in 0 1 2; do a+=("$(ticks "${pids[$i]}")"); done
	if [ "$PROFILE" = 1 ]; then
		for i in 1 2 3; do
			curl -fsS -o "$OUT_DIR/$tag-node$i.pprof" \
				"http://127.0.0.1:$(port $((7200 + i)))/debug/pprof/profile?seconds=$PROFILE_SECONDS" &
			prof+=($!)
		done
	fi
	out=$(bench_run "$bin" "http://127.0.0.1:$(port 7201)" "$dir/bench.log")
	for i in 0 1 2; do b+=("$(ticks "${pids[$i]}")"); done
	for p in "${prof[@]:-}"; do [ -n "$p" ] && wait "$p" || true; done
	stop_all
	echo "$out $((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2]))"
}

# The port arithmetic above keeps the last digit (900x -> 4000x with the
# default offset): it needs an offset that is a multiple of 10.
if [ $((OFF % 10)) -ne 0 ]; then
	echo "PORT_OFFSET must be a multiple of 10" >&2
	exit 2
fi

results="$work/results"
: >"$results"
echo "load before: $(cat /proc/loadavg)"
printf '%-4s %-28s %10s %8s %10s %6s %6s %6s %10s %8s %6s\n' \
	round binary single_us single_sps cluster_us n1 n2 n3 ratio cluster_sps load1
for r in $(seq 1 "$ROUNDS"); do
	for bin in "${bins[@]}"; do
		d="$work/r$r-$(basename "$bin")"
		read -r s_n s_sps s_t < <(single "$bin" "$d/single")
		read -r c_n c_sps c1 c2 c3 < <(cluster "$bin" "$d/cluster" "r$r-$(basename "$bin")")
		line=$(awk -v hz="$HZ" -v sn="$s_n" -v st="$s_t" -v cn="$c_n" -v c1="$c1" -v c2="$c2" -v c3="$c3" \
			'BEGIN { su = st * 1e6 / hz / sn; cu = (c1 + c2 + c3) * 1e6 / hz / cn; printf "%.3f %.3f %.2f", su, cu, cu / su }')
		read -r su cu ratio <<<"$line"
		load=$(cut -d' ' -f1 /proc/loadavg)
		printf '%-4s %-28s %10s %8s %10s %6s %6s %6s %10s %8s %6s\n' \
			"$r" "$(basename "$bin")" "$su" "${s_sps%.*}" "$cu" "$c1" "$c2" "$c3" "${ratio}x" "${c_sps%.*}" "$load"
		echo "$bin $su $cu $ratio $c_sps" >>"$results"
	done
done
echo "medians over $ROUNDS rounds:"
for bin in "${bins[@]}"; do
	med() { grep "^$bin " "$results" | awk -v f="$1" '{print $f}' | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
	printf '  %-28s single %s us/sample, cluster %s us/sample, ratio %sx, cluster %s samples/s\n' \
		"$(basename "$bin")" "$(med 2)" "$(med 3)" "$(med 4)" "$(med 5)"
done
echo "load after: $(cat /proc/loadavg)"
