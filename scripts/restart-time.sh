#!/usr/bin/env bash
# restart-time.sh: seconds from a restart after kill -9 to /ready 200, at
# SERIES active series (issue 30, item 2).
#
# For each binary given, in turn, ROUNDS times, interleaved (A B A B ...:
# the machine is shared, only interleaved runs compare):
#
#   1. a fresh one-node Tessera on its embedded defaults (own etcd, RF 1,
#      autoInit; only ports and data dir set) in an empty temp dir;
#   2. `tessera bench --series SERIES --samples SAMPLES` through remote
#      write, every sample acknowledged (" 0 failed samples");
#   3. kill -9 of the node: nothing flushed beyond what the commit log
#      holds at that moment;
#   4. the same binary restarted on the same dir; the time from the exec to
#      the first 200 on /ready (polled every 50 ms) is the figure; next to
#      it the CPU seconds the node used until then (utime+stime: on a
#      shared machine the figure the load moves least) and the node's own
#      "storage recovered" line (its "took"), so the part spent in
#      recovery and the part around it show.
#
# SHARED=1 loads once: the first binary is fed and killed, and every
# restart (each binary, each round) starts from a fresh copy of its data
# dir, so that the restarts compare on identical input and a large SERIES
# costs one bench, not one per run. The commit log format must be the
# same for all binaries. FROM=DIR restarts from a copy of DIR/data
# instead (the killed node kept by an earlier SHARED=1 KEEP=1 run, in
# its temp dir's killed/), loading nothing; SERIES only labels the output.
#
# EXTRA_YML is appended to the loading node's node.yml (e.g. a
# storage.restartSnapshot section). RESTART_YML is appended to the
# node.yml of the restarts of the binaries named in RESTART_YML_BINS
# (space-separated paths as given): the config is strict, so a base
# build that lacks a key must not get it. SNAPSHOT_WAIT=1 makes load() wait, after the bench, for the
# node's next "restart snapshot written" line before the kill, so that
# the killed node's dir holds a restart snapshot covering (nearly) all of
# the bench; a build without restart snapshots ignores it at restart and
# replays the whole commit log.
#
# MEM_AFTER=N also reports, N seconds after /ready (outside the timed
# part), the restarted node's VmRSS and Go heap in use by live and not
# yet collected objects (go_memstats_heap_alloc_bytes), after "recovered".
#
# PROFILE=1 also takes a CPU profile of the restart (/debug/pprof/profile,
# PROFILE_SECS long, started as soon as HTTP answers) into
# $work/<bin>-<round>.pprof (use KEEP=1 to keep it).
#
# Usage:
#   scripts/restart-time.sh TESSERA_BIN [TESSERA_BIN2 ...]
#   SERIES=5000000 ROUNDS=2 scripts/restart-time.sh /tmp/base-tessera ./tessera
#   SHARED=1 SERIES=5000000 ROUNDS=3 scripts/restart-time.sh /tmp/base-tessera ./tessera
#
# Environment: SERIES (1000000), SAMPLES (4), ROUNDS (2), PORT (19660:
# HTTP; RPC +1, etcd +2/+3), BENCH (the tessera that runs the bench;
# default the first binary), SHARED, MEM_AFTER, PROFILE, PROFILE_SECS (10), KEEP=1
# keeps the temp dir.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 TESSERA_BIN [TESSERA_BIN2 ...]" >&2; exit 2; }
BINS=("$@")
BENCH=${BENCH:-$1}
SERIES=${SERIES:-1000000}
SAMPLES=${SAMPLES:-4}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-19660}
PROFILE=${PROFILE:-0}
PROFILE_SECS=${PROFILE_SECS:-10}
KEEP=${KEEP:-0}
SHARED=${SHARED:-0}
FROM=${FROM:-}
URL=http://127.0.0.1:$PORT
for b in "${BINS[@]}" "$BENCH"; do
	[ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done

work=$(mktemp -d /tmp/restart-time.XXXXXX)
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

# ticks, wait_up and node_yml
. "$(dirname "$0")/storelib.sh"

now_ns() { date +%s%N; }

# load BIN DIR: a fresh node of BIN on DIR/data fed by the bench, then
# killed with SIGKILL.
load() {
	local bin=$1 dir=$2
	mkdir -p "$dir"
	node_yml "$dir" "$PORT" "$SERIES" >"$dir/node.yml"
	printf '%b' "${EXTRA_YML:-}" >>"$dir/node.yml"
	"$bin" node -f "$dir/node.yml" >"$dir/node.log" 2>&1 &
	pid=$!
	wait_up "$URL" /ready "$dir/node.log" "$pid"
	"$BENCH" bench --url "$URL" --series "$SERIES" --samples "$SAMPLES" >"$dir/bench.log" 2>&1 ||
		{ echo "bench failed:" >&2; tail -5 "$dir/bench.log" >&2; return 1; }
	grep -q ' 0 failed samples' "$dir/bench.log" || { echo "bench lost samples:" >&2; tail -3 "$dir/bench.log" >&2; return 1; }
	if [ "${SNAPSHOT_WAIT:-0}" = 1 ]; then
		local before i
		before=$(grep -c 'restart snapshot written' "$dir/node.log" || true)
		for i in $(seq 1 1200); do
			[ "$(grep -c 'restart snapshot written' "$dir/node.log" || true)" -gt "$before" ] && break
			sleep 0.5
		done
		grep 'restart snapshot written' "$dir/node.log" | tail -1 >&2
	fi
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
}

# restart BIN DIR PROFILE_OUT -> prints "ready_s cpu_s recovered_took":
# BIN started on the killed node's DIR/data, timed until /ready is 200.
restart() {
	local bin=$1 dir=$2 t0 t1 code took cpu profiled=0 ppid=""
	node_yml "$dir" "$PORT" "$SERIES" >"$dir/node.yml"
	case " ${RESTART_YML_BINS:-} " in *" $bin "*) printf '%b' "${RESTART_YML:-}" >>"$dir/node.yml" ;; esac
	t0=$(now_ns)
	"$bin" node -f "$dir/node.yml" >"$dir/restart.log" 2>&1 &
	pid=$!
	while :; do
		code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/ready" 2>/dev/null || true)
		[ "$code" = 200 ] && break
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "restart exited before ready:" >&2
			tail -5 "$dir/restart.log" >&2
			return 1
		fi
		if [ "$PROFILE" = 1 ] && [ "$profiled" = 0 ] && [ "$code" != 000 ]; then
			curl -s -o "$3" "$URL/debug/pprof/profile?seconds=$PROFILE_SECS" &
			ppid=$!
			profiled=1
		fi
		sleep 0.05
	done
	t1=$(now_ns)
	cpu=$(ticks "$pid")
	if [ -n "$ppid" ]; then wait "$ppid" || true; fi
	took=$(grep -o 'storage recovered.*' "$dir/restart.log" | grep -o 'took=[^ ]*' | head -1 || true)
	if [ -n "${MEM_AFTER:-}" ]; then
		sleep "$MEM_AFTER"
		took="$took rss=$(awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")MB"
		took="$took heap=$(curl -s "$URL/metrics" | awk '/^go_memstats_heap_alloc_bytes / {printf "%.0f", $2 / 1048576}')MB"
	fi
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	rm -rf "$dir/data"
	awk -v a="$t0" -v b="$t1" -v c="$cpu" -v hz="$(getconf CLK_TCK)" -v t="${took:-took=?}" \
		'BEGIN {printf "%.2f %.2f %s\n", (b - a) / 1e9, c / hz, t}'
}

run() { # run BIN_INDEX ROUND -> prints "ready_s cpu_s recovered_took"
	local bin=${BINS[$1]} dir=$work/b$1-r$2
	if [ "$SHARED" = 1 ]; then
		mkdir -p "$dir"
		cp -a "$work/killed/data/." "$dir/data"
	else
		load "$bin" "$dir"
	fi
	restart "$bin" "$dir" "$work/b$1-r$2.pprof"
}

if [ -n "$FROM" ]; then
	# The killed node's directory of an earlier run (KEEP=1 keeps
	# $work/killed): restarts only.
	[ -d "$FROM/data/commitlog" ] || { echo "no killed node's data in $FROM" >&2; exit 2; }
	SHARED=1
	mkdir -p "$work/killed"
	ln -s "$(cd "$FROM" && pwd)/data" "$work/killed/data"
elif [ "$SHARED" = 1 ]; then
	# One load for every restart: the first binary writes, is killed, and
	# each restart starts from a copy of what it left.
	load "${BINS[0]}" "$work/killed"
	echo "loaded once with ${BINS[0]}: $(du -sh "$work/killed/data" | cut -f1) on disk"
fi
echo "series $SERIES x $SAMPLES samples; load before: $(cat /proc/loadavg)"
printf '%-5s %-32s %8s %6s %-22s %6s\n' round binary ready_s cpu_s recovered load1
for r in $(seq 1 "$ROUNDS"); do
	for i in "${!BINS[@]}"; do
		# Not in a subshell: the trap must see the node's pid.
		run "$i" "$r" >"$work/run.out"
		read -r secs cpu took <"$work/run.out"
		printf '%-5s %-32s %8s %6s %-22s %6s\n' "$r" "${BINS[$i]}" "$secs" "$cpu" "$took" "$(cut -d' ' -f1 /proc/loadavg)"
	done
done
echo "load after: $(cat /proc/loadavg)"
