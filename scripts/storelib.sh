# storelib.sh: shell functions the comparison scripts share (sourced by
# mem-per-series.sh and query-vs-vm.sh), so that starting a store and
# reading its CPU are done one way.

# ticks PID: utime+stime of the process in clock ticks (fields 14 and 15
# of /proc/PID/stat, the 12th and 13th after the command name's ')').
ticks() {
	local s
	s=$(cat "/proc/$1/stat")
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}

# wait_up URL PATH LOG PID: poll URL/PATH for up to 120 s, failing at once
# if the process exited.
wait_up() {
	local i
	for i in $(seq 1 1200); do
		curl -fsS -o /dev/null "$1$2" 2>/dev/null && return 0
		if ! kill -0 "$4" 2>/dev/null; then
			echo "exited before it was up: $1" >&2
			tail -5 "$3" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "not up after 120 s: $1" >&2
	tail -5 "$3" >&2
	return 1
}

# node_yml DIR PORT [SERIES]: a one-node Tessera config on its embedded
# defaults (own etcd, placement initialised) with its data in DIR/data and
# its ports PORT to PORT+3. With SERIES above the defaults sized for a
# million series, what an operator of a bigger node sets is raised to
# SERIES: limits.maxActiveSeries (or the writes past a million series
# would be refused, 429), limits.maxFetchedSeriesPerQuery (or a query
# over all of them would be), and http.seriesCacheSize (the remote write
# series cache must hold every active series, or steady writes miss it
# and rebuild each entry: docs/performance.md, "default cache"). Its
# query.timeout goes from 2 to 10 minutes (VictoriaMetrics gets
# -search.maxQueryDuration 10m): at ten million series on a loaded
# machine a query over all of them ran past two minutes.
node_yml() {
	local cache=""
	if [ "${3:-0}" -gt 1000000 ]; then
		printf 'limits:\n  maxActiveSeries: %d\n  maxFetchedSeriesPerQuery: %d\n' "$3" "$3"
		printf 'query:\n  timeout: 10m\n'
		cache="  seriesCacheSize: $3"
	fi
	cat <<EOF
id: node1
dataDir: $1/data
http:
  listen: 127.0.0.1:$2
${cache}
rpc:
  listen: 127.0.0.1:$(($2 + 1))
cluster:
  autoInit: true
etcd:
  embedded:
    enabled: true
    clientURL: http://127.0.0.1:$(($2 + 2))
    peerURL: http://127.0.0.1:$(($2 + 3))
EOF
}
