#!/usr/bin/env bash
# query-cluster.sh: the Grafana-style query table through node 1 of the
# three-node RF 3 example next to one node holding the same data (issue 28).
#
#   1. starts the three-node example (config/examples/three-node, only its
#      ports and data directories changed: embedded etcd seeds, write
#      majority, read unstrict_majority), creates its RF 3 placement and
#      waits for every node to be ready; starts one node on the embedded
#      defaults (as query-vs-vm.sh does);
#   2. loads `tessera bench --workload nodeexporter --hosts HOSTS` through
#      node 1, then the same data (the --start it printed) into the single
#      node, and waits until both answer every series;
#   3. runs `tessera bench queries` ROUNDS times against node 1 and the
#      single node, alternating, and prints per query the best time of
#      each, the ratio cluster/single and the geometric mean, and the CPU
#      the nodes used per table (all three cluster nodes against the
#      single node: the work a query costs, which times on a shared
#      machine show only through its noise);
#   4. runs each query once more through node 1 alone and prints the bytes
#      node 1 received from the other nodes for it (its session's
#      read_received_bytes counter on /metrics: series IDs and encoded
#      streams). While reads fetch raw series, at unstrict_majority that is
#      one other replica's encoded samples of every selected series: the
#      "raw samples' encoded size" a pushdown is measured against.
#
# Usage:
#   scripts/query-cluster.sh TESSERA_BIN
#   HOSTS=200 ROUNDS=3 scripts/query-cluster.sh /tmp/tessera
#
# Environment: HOSTS (800: ~100,000 series), ROUNDS (3), PORT (26100:
# node i's HTTP is PORT+10*i, its RPC +1, etcd client +2 and peer +3; the
# single node PORT+40..43), PUSHDOWN (true: the cluster nodes' query.pushdown),
# READ (unstrict_majority: the cluster's read consistency; one asks one
# replica per shard, so that each node computes a third of the shards),
# AB=1 (node 2 runs with query.pushdown false whatever PUSHDOWN says, and
# each round also queries through node 2: an A/B of the pushdown in the
# same window, both nodes holding every shard at RF 3; a second table
# compares node 1 with node 2), KEEP=1 keeps the temp dir (logs, tables),
# CPU_QUOTA (unset: no limit; e.g. 0.6) see below; CPU_AB=1 with it runs
# the rounds twice over the one load, first unlimited, then with the quota;
# CPU_PERIOD_US (10000) the quota's period; PROFILE=S at the end profiles
# node 1 (and node 2) for S seconds while the queries PROFILE_QUERIES
# (default: all of the table) run through node 1 in a loop, into
# node1.pprof and node2.pprof in the temp dir (use with KEEP=1).
#
# CPU_QUOTA=F emulates one machine per node. Unlimited, the three cluster
# nodes share this machine's cores with each other, so a query fanned out
# to three nodes cannot use more CPU than one node answering it alone,
# and the comparison is of one machine's CPU against the same CPU split
# three ways. With CPU_QUOTA each node process (the three cluster nodes
# and the single node) runs in a cgroup of its own limited to F CPUs
# (cgroup v2 cpu.max "F*PERIOD PERIOD", or v1 cpu.cfs_quota_us where the
# cpu controller is on v1): every node, the single one included, has the
# same CPU, as on four equal machines. The period is short (10 ms, not
# the kernel's 100 ms) so that a query is not stalled for most of a
# period once its node has used its quota: a slower CPU, not a paused one. 3*F should stay below the cores
# the machine has (0.6 on 2 cores) so that the three nodes are not also
# contending with each other. The quota is set after the load (writes
# run unlimited) and before the query rounds; the load generator and the
# query client run outside the cgroups. Needs root (a writable
# /sys/fs/cgroup); the cgroups are removed on exit.
set -euo pipefail

TESSERA=${1:?usage: $0 TESSERA_BIN}
HOSTS=${HOSTS:-800}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-26100}
KEEP=${KEEP:-0}
PUSHDOWN=${PUSHDOWN:-true}
AB=${AB:-0}
READ=${READ:-unstrict_majority}
CPU_QUOTA=${CPU_QUOTA:-}
CPU_PERIOD_US=${CPU_PERIOD_US:-10000}
PROFILE=${PROFILE:-0}
PROFILE_QUERIES=${PROFILE_QUERIES:-}
[ -x "$TESSERA" ] || { echo "not an executable: $TESSERA" >&2; exit 2; }

work=$(mktemp -d /tmp/query-cluster.XXXXXX)
pids=()
cgroups=()
cleanup() {
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
	for g in "${cgroups[@]:-}"; do [ -n "$g" ] && rmdir "$g" 2>/dev/null || true; done
	if [ "$KEEP" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ticks, wait_up and node_yml
. "$(dirname "$0")/storelib.sh"

# cg_root: where a cgroup with a cpu quota is made: the v2 hierarchy when
# its cpu controller is available there, else the v1 cpu hierarchy.
cg_root=""
cg_v=""
if [ -n "$CPU_QUOTA" ]; then
	if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		cg_root=/sys/fs/cgroup cg_v=2
		grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
	elif [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
		cg_root=/sys/fs/cgroup/cpu cg_v=1
	else
		echo "CPU_QUOTA: no writable cgroup cpu controller under /sys/fs/cgroup" >&2
		exit 2
	fi
fi
# cg_enter NAME PID: PID into a cgroup of its own, unlimited until cg_limit.
cg_enter() {
	[ -n "$cg_root" ] || return 0
	local g="$cg_root/query-cluster-$$-$1"
	mkdir -p "$g"
	cgroups+=("$g")
	echo "$2" >"$g/cgroup.procs"
}
# cg_limit: every cgroup of this run to CPU_QUOTA CPUs.
cg_limit() {
	[ -n "$cg_root" ] || return 0
	local g q
	q=$(awk -v f="$CPU_QUOTA" -v p="$CPU_PERIOD_US" 'BEGIN {printf "%d", f * p}')
	for g in "${cgroups[@]}"; do
		if [ "$cg_v" = 2 ]; then
			echo "$q $CPU_PERIOD_US" >"$g/cpu.max"
		else
			echo "$CPU_PERIOD_US" >"$g/cpu.cfs_period_us"
			echo "$q" >"$g/cpu.cfs_quota_us"
		fi
	done
	echo "cpu quota: $CPU_QUOTA CPUs per node ($q us every $CPU_PERIOD_US us, cgroup v$cg_v, ${#cgroups[@]} cgroups)"
}

http() { echo $((PORT + 10 * $1)); }
etcds="127.0.0.1:$(($(http 1) + 2)),127.0.0.1:$(($(http 2) + 2)),127.0.0.1:$(($(http 3) + 2))"
initial="node1=http://127.0.0.1:$(($(http 1) + 3)),node2=http://127.0.0.1:$(($(http 2) + 3)),node3=http://127.0.0.1:$(($(http 3) + 3))"

# cluster_yml I: node I of the three-node example with this script's ports.
cluster_yml() {
	local p
	p=$(http "$1")
	cat <<EOF
id: node$1
isolationGroup: rack$1
dataDir: $work/node$1/data
http:
  listen: 127.0.0.1:$p
rpc:
  listen: 127.0.0.1:$((p + 1))
commitlog:
  mode: sync
namespaces:
  - name: default
    retention: 48h
    blockSize: 2h
    bufferPast: 10m
    bufferFuture: 2m
query:
  pushdown: $(if [ "$AB" = 1 ] && [ "$1" = 2 ]; then echo false; else echo "$PUSHDOWN"; fi)
cluster:
  name: default
  writeConsistency: majority
  readConsistency: $READ
etcd:
  endpoints: [${etcds//,/, }]
  embedded:
    enabled: true
    name: node$1
    clientURL: http://127.0.0.1:$((p + 2))
    peerURL: http://127.0.0.1:$((p + 3))
    initialCluster: $initial
EOF
}

npids=()
for i in 1 2 3; do
	mkdir -p "$work/node$i"
	cluster_yml "$i" >"$work/node$i/node.yml"
	"$TESSERA" node -f "$work/node$i/node.yml" >"$work/node$i/node.log" 2>&1 &
	pids+=($!)
	npids+=($!)
	cg_enter "node$i" $!
done
export TESSERA_ETCD_ENDPOINTS=$etcds
for try in $(seq 1 60); do
	if "$TESSERA" placement init --rf 3 --shards 4096 \
		--instance "id=node1,group=rack1,endpoint=127.0.0.1:$(($(http 1) + 1)),http=127.0.0.1:$(http 1)" \
		--instance "id=node2,group=rack2,endpoint=127.0.0.1:$(($(http 2) + 1)),http=127.0.0.1:$(http 2)" \
		--instance "id=node3,group=rack3,endpoint=127.0.0.1:$(($(http 3) + 1)),http=127.0.0.1:$(http 3)" \
		>"$work/init.log" 2>&1; then
		break
	fi
	grep -q "already exists" "$work/init.log" && break
	[ "$try" = 60 ] && { cat "$work/init.log" >&2; exit 1; }
	sleep 2
done
for i in 1 2 3; do
	for try in $(seq 1 300); do
		"$TESSERA" ready --url "http://127.0.0.1:$(http "$i")" >/dev/null 2>&1 && break
		kill -0 "${npids[$((i - 1))]}" 2>/dev/null || { tail -5 "$work/node$i/node.log" >&2; exit 1; }
		[ "$try" = 300 ] && { echo "node$i not ready after 300 s" >&2; exit 1; }
		sleep 1
	done
done
C_URL=http://127.0.0.1:$(http 1)

mkdir -p "$work/single"
S_PORT=$((PORT + 40))
node_yml "$work/single" "$S_PORT" >"$work/single/node.yml"
"$TESSERA" node -f "$work/single/node.yml" >"$work/single/node.log" 2>&1 &
pids+=($!)
spid=$!
cg_enter single $!
S_URL=http://127.0.0.1:$S_PORT
wait_up "$S_URL" /ready "$work/single/node.log" "$spid"

instant() {
	curl -fsS "$1/api/v1/query" --data-urlencode "query=$2" --data-urlencode "time=$3" 2>/dev/null |
		jq -r '.data.result[0].value[1] // empty' 2>/dev/null || true
}
wait_for() {
	local i got=""
	for i in $(seq 1 600); do
		got=$(instant "$1" "$2" "$4")
		[ "$got" = "$3" ] && return 0
		sleep 1
	done
	echo "$5 answers $got to $2, want $3, after 10 minutes" >&2
	return 1
}

echo "load before loading: $(cat /proc/loadavg)"
"$TESSERA" bench --workload nodeexporter --hosts "$HOSTS" --url "$C_URL" | tee "$work/load-cluster.log"
start=$(sed -n 's/.*--start \([0-9]*\).*/\1/p' "$work/load-cluster.log")
series=$(awk '/^write: [0-9]+ samples of/ {print $5}' "$work/load-cluster.log")
[ -n "$start" ] && [ -n "$series" ] || { echo "could not read the start and samples from the load" >&2; exit 1; }
"$TESSERA" bench --workload nodeexporter --hosts "$HOSTS" --start "$start" --url "$S_URL" | tee "$work/load-single.log"
end=$(((start + 30 * 60 * 1000 + 10000) / 1000 + 15))
wait_for "$C_URL" 'count(last_over_time({job="node"}[1h]))' "$series" "$end" cluster
wait_for "$S_URL" 'count(last_over_time({job="node"}[1h]))' "$series" "$end" single
echo "both hold $series series (start $start)"

# cpu_ticks PID...: the CPU (user + system, clock ticks) the processes
# have used so far.
cpu_ticks() {
	local s=0 p
	for p in "$@"; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	echo "$s"
}
CLK_TCK=$(getconf CLK_TCK)

# measure LABEL: ROUNDS rounds of the query table, the bytes node 1
# receives per query, and the tables.
measure() {
	res="$work/results-$1"
	: >"$res"
	for r in $(seq 1 "$ROUNDS"); do
		order="cluster single"
		[ $((r % 2)) = 0 ] && order="single cluster"
		[ "$AB" = 1 ] && order="cluster raw single" && [ $((r % 2)) = 0 ] && order="single raw cluster"
		for who in $order; do
			case $who in
			cluster) url=$C_URL ;;
			raw) url=http://127.0.0.1:$(http 2) ;;
			*) url=$S_URL ;;
			esac
			# The CPU the answering nodes used for the round: all three
			# cluster nodes (however the work was split), or the single.
			if [ "$who" = single ]; then cp=("$spid"); else cp=("${npids[@]}"); fi
			c0=$(cpu_ticks "${cp[@]}")
			"$TESSERA" bench queries --url "$url" --start "$start" --rounds 1 >"$work/q-$1-$who-$r.txt"
			cpu_ms=$((($(cpu_ticks "${cp[@]}") - c0) * 1000 / CLK_TCK))
			echo "cpu $who $r $cpu_ms" >>"$res"
			geo=$(awk '$1 == "geomean" {print $2}' "$work/q-$1-$who-$r.txt")
			printf 'round %s %-8s geomean %8s ms, nodes cpu %6s ms, load1 %s\n' "$r" "$who" "$geo" "$cpu_ms" "$(cut -d' ' -f1 /proc/loadavg)"
			awk -v who="$who" -v r="$r" 'f && $1 != "geomean" {print "q", who, r, $1, $2, $3} $1 == "query" {f = 1}' \
				"$work/q-$1-$who-$r.txt" >>"$res"
		done
	done

	# received: node 1's session counter of bytes received by reads. Its
	# metrics reach /metrics once a second (tally's report interval): read it
	# 2.5 s after the last query.
	received() {
		sleep 2.5
		curl -fsS "$C_URL/metrics" | awk '/^tessera_session_read_received_bytes(_total)?[ {]/ {s += $NF} END {printf "%d\n", s}'
	}
	names=$(awk '$1 == "q" && $2 == "cluster" && $3 == 1 {print $4}' "$res")
	for q in $names; do
		b0=$(received)
		"$TESSERA" bench queries --url "$C_URL" --start "$start" --rounds 1 --only "$q" >/dev/null
		b1=$(received)
		echo "bytes $q $((b1 - b0))" >>"$res"
	done

	echo
	echo "best of $ROUNDS per query (ms), three-node RF 3 (read $READ, pushdown $PUSHDOWN, cpu quota $(if [ "$1" = quota ]; then echo "$CPU_QUOTA"; else echo none; fi)) through node 1 vs one node, $HOSTS hosts, $TESSERA:"
	awk '
	$1 == "q" {
		k = $2 SUBSEP $4
		if (!(k in best) || $5 < best[k]) best[k] = $5
		if (!($4 in seen)) { seen[$4] = 1; names[++n] = $4 }
	}
	$1 == "bytes" { bytes[$2] = $3 }
	$1 == "cpu" { cpu[$2] += $4; rounds[$2]++ }
	END {
		printf "%-20s %12s %12s %8s %16s\n", "query", "cluster_ms", "single_ms", "ratio", "node1_rx_bytes"
		lc = 0; ls = 0; worst = 0
		for (i = 1; i <= n; i++) {
			q = names[i]; c = best["cluster" SUBSEP q]; s = best["single" SUBSEP q]
			printf "%-20s %12.2f %12.2f %7.2fx %16d\n", q, c, s, c / s, bytes[q]
			lc += log(c); ls += log(s)
			if (c / s > worst) worst = c / s
		}
		printf "%-20s %12.2f %12.2f %7.2fx   (worst %.2fx)\n", "geomean", exp(lc / n), exp(ls / n), exp((lc - ls) / n), worst
		if (rounds["single"] > 0 && cpu["single"] > 0)
			printf "nodes cpu per table: cluster %.0f ms (three nodes), single %.0f ms, %.2fx\n", cpu["cluster"] / rounds["cluster"], cpu["single"] / rounds["single"], (cpu["cluster"] / rounds["cluster"]) / (cpu["single"] / rounds["single"])
	}' "$res"
	if [ "$AB" = 1 ]; then
		echo
		echo "the same window: node 1 (pushdown $PUSHDOWN) vs node 2 (pushdown false), best of $ROUNDS (ms):"
		awk '
		$1 == "q" {
			k = $2 SUBSEP $4
			if (!(k in best) || $5 < best[k]) best[k] = $5
			if (!($4 in seen)) { seen[$4] = 1; names[++n] = $4 }
		}
		END {
			printf "%-20s %12s %12s %8s %8s\n", "query", "node1_ms", "node2_ms", "n1/n2", "n2/single"
			lc = 0; lr = 0; ls = 0
			for (i = 1; i <= n; i++) {
				q = names[i]; c = best["cluster" SUBSEP q]; r = best["raw" SUBSEP q]; s = best["single" SUBSEP q]
				printf "%-20s %12.2f %12.2f %7.2fx %7.2fx\n", q, c, r, c / r, r / s
				lc += log(c); lr += log(r); ls += log(s)
			}
			printf "%-20s %12.2f %12.2f %7.2fx %7.2fx\n", "geomean", exp(lc / n), exp(lr / n), exp((lc - lr) / n), exp((lr - ls) / n)
		}' "$res"
	fi
}

if [ -n "$CPU_QUOTA" ] && [ "${CPU_AB:-0}" = 1 ]; then
	measure unlimited
	cg_limit
	measure quota
else
	cg_limit
	measure "${CPU_QUOTA:+quota}"
fi
if [ "$PROFILE" -gt 0 ]; then
	qs=${PROFILE_QUERIES:-$(awk '$1 == "q" && $3 == 1 && $2 == "cluster" {print $4}' "$res")}
	ppids=()
	for n in 1 2; do
		curl -fsS -o "$work/node$n.pprof" "http://127.0.0.1:$(http "$n")/debug/pprof/profile?seconds=$PROFILE" &
		ppids+=($!)
	done
	t_end=$((SECONDS + PROFILE))
	count=0
	while [ "$SECONDS" -lt "$t_end" ]; do
		for q in $qs; do
			"$TESSERA" bench queries --url "$C_URL" --start "$start" --rounds 1 --only "$q" >/dev/null
			count=$((count + 1))
		done
	done
	wait "${ppids[@]}"
	echo "profiled node 1 and node 2 for $PROFILE s over $count queries ($qs): $work/node1.pprof, $work/node2.pprof"
fi
echo "load after: $(cat /proc/loadavg)"
