package rpc

// WriteResult reports a write that was carried out. Rejected samples
// (outside the namespace's retention or buffer window) are refused for good:
// retrying them cannot succeed, so they are reported here and not as an RPC
// error; the Written others are durable per the node's commit log mode.
type WriteResult struct {
	Written   int
	Rejected  int
	RejectMsg string
	// RejectedSeriesLimit of the Rejected were new series past the
	// node's limits.maxActiveSeries: a retry may store them.
	RejectedSeriesLimit int
}
