#!/bin/bash
# rss.sh BINARY LABEL: starts a one-node Tessera (HTTP on 127.0.0.1:24100,
# data in a temp dir), writes 15 series, and prints its resident memory
# idle, right after the bad-input probes (main.go) and over three minutes.
set -u
. "$(dirname "$0")/../storelib.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node_yml "$dir" 24100 > "$dir/node.yml"
(cd "$(dirname "$0")" && go build -o "$dir/probe" .)
"$1" node -f "$dir/node.yml" > "$dir/node-$2.log" 2>&1 &
PID=$!
for i in $(seq 1 60); do curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:24100/ready 2>/dev/null | grep -q 200 && break; sleep 1; done
"$dir/probe" http://127.0.0.1:24100 idle >/dev/null; sleep 10
echo "$2 idle: $(grep VmRSS /proc/$PID/status)"
"$dir/probe" http://127.0.0.1:24100 probes >/dev/null; "$dir/probe" http://127.0.0.1:24100 heavy > "$dir/heavy-$2.log" 2>&1
echo "$2 after probes: $(grep VmRSS /proc/$PID/status)"
prev=0; for s in 5 10 30 60 120 180; do sleep $((s - prev)); prev=$s; echo "$2 +${s}s: $(grep VmRSS /proc/$PID/status)"; done
kill $PID; wait $PID 2>/dev/null
