#!/usr/bin/env bash
# disk-per-sample.sh: files and allocated bytes per sample on disk, Tessera
# next to VictoriaMetrics on the same remote-write data (issue 18).
#
# One run, for each store in turn (never both at once, the machine is
# shared):
#
#   1. start it fresh in an empty temp dir: Tessera as the embedded default
#      (own etcd, RF 1, autoInit, 4096 shards) with only its ports changed;
#      VictoriaMetrics single-node with only -storageDataPath and
#      -httpListenAddr;
#   2. feed it `tessera bench --series SERIES --samples SAMPLES --interval
#      INTERVAL --start START` (remote write 1.0). VictoriaMetrics gets it on
#      /api/v1/write: bench appends /api/v1/prom/remote/write to --url, so
#      the URL given ends in "?p=" and that suffix becomes an ignored query
#      argument;
#   3. let it flush: Tessera until the block's fileset checkpoint exists,
#      the commit log holds no file the block's data needs, and the file
#      list under data/ has not changed for three ticks; VictoriaMetrics
#      /internal/force_flush, then /internal/force_merge for the month, then
#      until vm_active_merges is 0 and the part list is stable;
#   4. count files (find -type f) and allocated bytes (du -s --block-size=1)
#      per part of the data directory, and print bytes per sample.
#
# START (ms, or "now" for bench's default) defaults to the start of the 2 h block two blocks before now,
# so the whole run lands in one past block (Tessera takes it as cold writes
# and flushes it at the next tick; retention 48 h and VictoriaMetrics'
# default 1 month keep it).
#
# What is counted (printed per part, then the sums):
#   Tessera:  data/<ns>/fileset-<block>-* (sealed data + series index: the
#             durable block), commitlog/, etcd/ and the rest (placement
#             cache, aux snapshots, repair state);
#   VM:       data/small + data/big (sample parts), data/indexdb (its
#             label index, per month partition since v1.1xx; a top-level
#             indexdb/ of older versions is counted with it), cache/ and
#             the rest (metadata, snapshots, tmp).
# The comparison is "durable" = Tessera's filesets vs VM's data/ (sample
# parts + label index), and also VM's sample parts alone.
#
# Usage:
#   SERIES=10000 SAMPLES=360 INTERVAL=10s scripts/disk-per-sample.sh
#   SERIES=1000000 SAMPLES=24 INTERVAL=5m scripts/disk-per-sample.sh
#   ONLY=tessera|vm   to run one of them
#   TICK=30m          ingest with storage.tickInterval 30m, then restart the
#                     node on the default (10s) so that the block is flushed
#                     in one volume, as a block filled live is (without it,
#                     ticks during a long bench flush the block several
#                     times: cold-write volumes, older sections superseded)
#   RSS=1             also print VmRSS of each store 5 s and 60 s after the
#                     bench (memory per active series)
#   RSS=1 DISK=0 START=now SERIES=1000000 SAMPLES=4 INTERVAL=1s
#                     issue 18's memory load (bench's own start: now), no
#                     flush, no disk figures
#
# Environment: TESSERA (binary, default /tmp/measure-tessera), VM (binary,
# default /tmp/vm/victoria-metrics), HTTP_PORT (17401), RPC_PORT (19200),
# ETCD_PORT (12679; peer port ETCD_PORT+1), VM_PORT (18628), BATCH (5000),
# CONCURRENCY (4), KEEP=1 keeps the temp dirs, OUT (temp dir root).
set -euo pipefail

TESSERA=${TESSERA:-/tmp/measure-tessera}
VM=${VM:-/tmp/vm/victoria-metrics}
SERIES=${SERIES:-10000}
SAMPLES=${SAMPLES:-360}
INTERVAL=${INTERVAL:-10s}
BATCH=${BATCH:-5000}
CONCURRENCY=${CONCURRENCY:-4}
HTTP_PORT=${HTTP_PORT:-17401}
RPC_PORT=${RPC_PORT:-19200}
ETCD_PORT=${ETCD_PORT:-12679}
VM_PORT=${VM_PORT:-18628}
ONLY=${ONLY:-}
RSS=${RSS:-0}
BLOCK_MS=$((2 * 3600 * 1000))
now_ms=$(($(date +%s) * 1000))
START=${START:-$((now_ms / BLOCK_MS * BLOCK_MS - 2 * BLOCK_MS))}
DISK=${DISK:-1}
TOTAL=$((SERIES * SAMPLES))
OUT=$(mktemp -d "${OUT:-/tmp}/disk-per-sample.XXXXXX")

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$OUT"; else echo "kept $OUT"; fi
}
trap cleanup EXIT

stop() { # stop PID: one we started; forget it so cleanup never signals a reused pid
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=() p
	for p in "${pids[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	pids=("${keep[@]}")
}

log() { echo "# $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }

# part NAME PATH...: files and allocated bytes of PATHs (missing ones are 0).
part() {
	local name=$1 files=0 bytes=0 p
	shift
	for p in "$@"; do
		[[ -e $p ]] || continue
		files=$((files + $(find "$p" -type f | wc -l)))
		bytes=$((bytes + $(du -s --block-size=1 "$p" | cut -f1)))
	done
	printf '%-10s %-28s files %8d  du %14d B  %7.3f B/sample\n' "$STORE" "$name" "$files" "$bytes" \
		"$(echo "$bytes / $TOTAL" | bc -l)"
}

rss() { # rss PID: VmRSS in bytes
	awk '/^VmRSS:/ {printf "%.0f\n", $2 * 1024}' "/proc/$1/status"
}

report_rss() { # report_rss NAME PID: VmRSS 5 s and 60 s after the bench
	local r t
	for t in 5 55; do
		sleep "$t"
		r=$(rss "$2")
		log "$1 VmRSS $r B = $(echo "$r / $SERIES" | bc) B/active series"
	done
}

bench() { # bench URL
	local start=(--start "$START")
	[[ $START == now ]] && start=()
	log "bench $SERIES series x $SAMPLES samples at $INTERVAL, start $START -> $1"
	"$TESSERA" bench --url "$1" --series "$SERIES" --samples "$SAMPLES" --interval "$INTERVAL" \
		--batch "$BATCH" --concurrency "$CONCURRENCY" "${start[@]}"
	log "bench done"
}

write_conf() { # write_conf EXTRA_YAML_LINE: the embedded default on our ports
	cat >"$dir/node.yml" <<EOF
dataDir: $dir/data
http:
  listen: 127.0.0.1:$HTTP_PORT
rpc:
  listen: 127.0.0.1:$RPC_PORT
etcd:
  endpoints: [127.0.0.1:$ETCD_PORT]
  embedded:
    enabled: true
    clientURL: http://127.0.0.1:$ETCD_PORT
    peerURL: http://127.0.0.1:$((ETCD_PORT + 1))
cluster:
  autoInit: true
$1
EOF
}

start_node() { # sets pid
	"$TESSERA" node -f "$dir/node.yml" 2>>"$dir/node.log" &
	pid=$!
	pids+=("$pid")
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$HTTP_PORT/ready" >/dev/null 2>&1 && break
		kill -0 "$pid" || { cat "$dir/node.log"; exit 1; }
		sleep 1
	done
	log "tessera ready (pid $pid)"
}

run_tessera() {
	STORE=tessera
	local dir=$OUT/tessera pid
	mkdir -p "$dir"
	local tick=""
	[[ -n ${TICK:-} ]] && tick="storage: {tickInterval: $TICK}"
	write_conf "$tick"
	start_node
	bench "http://127.0.0.1:$HTTP_PORT"
	[[ $RSS == 1 ]] && report_rss tessera "$pid"
	[[ $DISK == 1 ]] || { stop "$pid"; return; }
	if [[ -n ${TICK:-} ]]; then
		# Ingested with a long tick: restart on the default one, so the
		# block is flushed once (commit log replay, then the first tick),
		# as a block that filled up live would be.
		stop "$pid"
		log "tessera stopped; restarting with the default tickInterval"
		write_conf ""
		start_node
	fi
	# Flushed: the block's checkpoint exists and data/ is unchanged for 3 ticks.
	local ns=$dir/data/data/default prev="" cur stable=0
	for _ in $(seq 360); do
		cur=$( (ls -l "$ns" 2>/dev/null || true) | md5sum)
		if ls "$ns"/fileset-*-checkpoint.db >/dev/null 2>&1 && [[ $cur == "$prev" ]]; then
			stable=$((stable + 1))
			((stable >= 3)) && break
		else
			stable=0
		fi
		prev=$cur
		sleep 10
	done
	log "tessera flushed"
	ls -l "$ns" "$dir/data/commitlog" || true
	part "filesets (durable block)" "$ns"
	part "commitlog" "$dir/data/commitlog"
	part "etcd" "$dir/data/etcd"
	local rest=()
	for p in "$dir/data"/*; do
		case $(basename "$p") in data | commitlog | etcd) ;; *) rest+=("$p") ;; esac
	done
	part "other (placement, aux, ...)" "${rest[@]}"
	part "data dir total" "$dir/data"
	stop "$pid"
}

vm_metric() { # vm_metric NAME: sum of a metric's values
	curl -s "http://127.0.0.1:$VM_PORT/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {print s + 0}'
}

run_vm() {
	STORE=vm
	local dir=$OUT/vm
	mkdir -p "$dir"
	"$VM" -storageDataPath="$dir/data" -httpListenAddr="127.0.0.1:$VM_PORT" >"$dir/vm.log" 2>&1 &
	local pid=$!
	pids+=("$pid")
	for _ in $(seq 60); do
		curl -sf "http://127.0.0.1:$VM_PORT/health" >/dev/null 2>&1 && break
		kill -0 "$pid" || { cat "$dir/vm.log"; exit 1; }
		sleep 1
	done
	log "vm ready (pid $pid)"
	bench "http://127.0.0.1:$VM_PORT/api/v1/write?p="
	[[ $RSS == 1 ]] && report_rss vm "$pid"
	[[ $DISK == 1 ]] || { stop "$pid"; return; }
	local month
	month=$(date -u -d @$((START / 1000)) +%Y_%m)
	curl -sf "http://127.0.0.1:$VM_PORT/internal/force_flush" >/dev/null
	sleep 2
	curl -sf "http://127.0.0.1:$VM_PORT/internal/force_merge?partition_prefix=$month" >/dev/null
	local prev="" cur stable=0
	for _ in $(seq 360); do
		cur=$( (find "$dir/data/data" "$dir/data/indexdb" -type d 2>/dev/null || true) | sort | md5sum)
		if [[ $(vm_metric vm_active_merges) == 0 && $cur == "$prev" ]]; then
			stable=$((stable + 1))
			((stable >= 3)) && break
		else
			stable=0
		fi
		prev=$cur
		sleep 5
	done
	log "vm merged: $(curl -s "http://127.0.0.1:$VM_PORT/metrics" | grep -E '^vm_(rows|parts)\{type="(storage|indexdb)/' | tr '\n' ' ')"
	part "samples (data/small+big)" "$dir/data/data/small" "$dir/data/data/big"
	part "label index (data/indexdb)" "$dir/data/data/indexdb" "$dir/data/indexdb"
	part "durable (data/)" "$dir/data/data" "$dir/data/indexdb"
	part "cache" "$dir/data/cache"
	part "data dir total" "$dir/data"
	find "$dir/data/data" -type f | sed "s|$dir/data/||" | sort | head -60
	stop "$pid"
}

log "$SERIES series x $SAMPLES samples = $TOTAL samples; tessera $("$TESSERA" version); vm $VM"
[[ $ONLY == vm ]] || run_tessera
[[ $ONLY == tessera ]] || run_vm
