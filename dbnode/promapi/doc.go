// Package promapi answers the Prometheus HTTP query API (/api/v1/query,
// /api/v1/query_range, /api/v1/series, /api/v1/labels,
// /api/v1/label/<name>/values, /api/v1/status/buildinfo) from Tessera's
// storage, so Grafana, promtool and curl get what Prometheus would answer
// over the same data.
//
// Two layers:
//
//   - An adapter (NewQueryable) from query.Reader to the interfaces of
//     github.com/prometheus/prometheus/storage. It pushes label matchers and
//     the selected time range down to Backend.Query, so the tag index never
//     yields series the matchers exclude, and it streams each series' samples
//     through a chunkenc.Iterator without copying them.
//   - HTTP handlers (API) that run Prometheus' own promql.Engine over that
//     adapter and render results with Prometheus' request parameters, JSON
//     envelope, error types and status codes (web/api/v1 is not importable
//     here: its dependencies are not in our module graph).
//
// Staleness markers (value.StaleNaN) pass through bit-exact, so the engine
// ends series at them exactly as Prometheus does.
package promapi
