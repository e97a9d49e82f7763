#!/usr/bin/env bash
# backup-throughput.sh: backup and restore throughput of one node holding
# SERIES x SAMPLES samples (default 50,000 x 1,000 = 50 M, 15 s apart: ~4 h,
# so sealed blocks and memory both), to a filesystem bucket (or the S3
# bucket config given as $BUCKET_CONFIG). Prints the full backup's and an
# incremental backup's size, time and rates, and the restore's.
#
#   scripts/backup-throughput.sh [BASE_PORT]   (default 25100; uses 8 ports)
#
# RESTORE_SHARDS=N restores into a node of N shards (the source has 4096).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/storelib.sh
PORT=${1:-25100}
SERIES=${SERIES:-50000}
SAMPLES=${SAMPLES:-1000}
DIR=$(mktemp -d /tmp/backup-throughput.XXXXXX)
trap 'kill $SRC $DST 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT
go build -o "$DIR/tessera" ./cmd/tessera
T="$DIR/tessera"

mkdir -p "$DIR/src" "$DIR/dst"
node_yml "$DIR/src" "$PORT" >"$DIR/src.yml"
"$T" node -f "$DIR/src.yml" >"$DIR/src.log" 2>&1 &
SRC=$!
wait_up "http://127.0.0.1:$PORT" /ready "$DIR/src.log" "$SRC"
START=$((($(date +%s) - SAMPLES * 15) * 1000))
"$T" bench --url "http://127.0.0.1:$PORT" --series "$SERIES" --samples "$SAMPLES" --interval 15s --concurrency 4 --start "$START" | tail -3
sleep 25 # two ticks: the sealed blocks flush

if [ -z "${BUCKET_CONFIG:-}" ]; then
	BUCKET_CONFIG="$DIR/bucket.yml"
	printf 'type: FILESYSTEM\nconfig:\n  directory: %s\n' "$DIR/bucket" >"$BUCKET_CONFIG"
fi
run() { # ID: back up, print the manifest's totals and the wall time
	local s e
	s=$(date +%s.%N)
	"$T" backup create --url "http://127.0.0.1:$PORT" --bucket-config "$BUCKET_CONFIG" --id "$1" -o json >"$DIR/$1.json"
	e=$(date +%s.%N)
	python3 - "$DIR/$1.json" "$s" "$e" "$SERIES" "$SAMPLES" "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); t = float(sys.argv[3]) - float(sys.argv[2]); tot = m["totals"]
n = int(sys.argv[4]) * int(sys.argv[5])
print(f"{sys.argv[6]}: {tot['objects']} parts, {tot['bytes']/1e6:.1f} MB; {tot.get('reusedObjects', 0)} referenced unread; uploaded {tot['uploadedObjects']} parts, "
      f"{tot['uploadedBytes']/1e6:.1f} MB in {t:.1f} s = {tot['uploadedBytes']/1e6/t:.1f} MB/s, "
      f"{n/t/1e6:.2f} M samples/s of the node's {n/1e6:.0f} M")
PY
}
run full
"$T" bench --url "http://127.0.0.1:$PORT" --series "$SERIES" --samples 2 --interval 15s --start "$(($(date +%s) * 1000))" | tail -1
run incremental
s=$(date +%s.%N)
"$T" backup verify --bucket-config "$BUCKET_CONFIG" --id full
e=$(date +%s.%N)
echo "verify full: $(python3 -c "print(f'{float($e)-float($s):.1f}')") s"

# Restore into a fresh node: from process start to /ready (etcd start
# and placement init included).
node_yml "$DIR/dst" $((PORT + 4)) >"$DIR/dst.yml"
printf 'bootstrap:\n  restore:\n    bucketConfigFile: %s\n    backup: full\n' "$BUCKET_CONFIG" >>"$DIR/dst.yml"
if [ -n "${RESTORE_SHARDS:-}" ]; then # restore into another shard count
	sed -i "s/^cluster:\$/cluster:\n  numShards: $RESTORE_SHARDS/" "$DIR/dst.yml"
fi
s=$(date +%s.%N)
"$T" node -f "$DIR/dst.yml" >"$DIR/dst.log" 2>&1 &
DST=$!
wait_up "http://127.0.0.1:$((PORT + 4))" /ready "$DIR/dst.log" "$DST" || { tail -20 "$DIR/dst.log"; exit 1; }
e=$(date +%s.%N)
python3 - "$DIR/full.json" "$s" "$e" "$SERIES" "$SAMPLES" "${RESTORE_SHARDS:-}" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); t = float(sys.argv[3]) - float(sys.argv[2]); b = m["totals"]["bytes"]
n = int(sys.argv[4]) * int(sys.argv[5])
print(f"restore full into a fresh node{' of ' + sys.argv[6] + ' shards' if sys.argv[6] else ''}: {b/1e6:.1f} MB in {t:.1f} s = {b/1e6/t:.1f} MB/s, {n/t/1e6:.2f} M samples/s")
PY
"$T" bench --url "http://127.0.0.1:$((PORT + 4))" --series "$SERIES" --samples "$SAMPLES" --interval 15s --verify-only \
	--start "$START" 2>&1 | tail -2 || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
