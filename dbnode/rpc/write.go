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

// add sums two results of one batch written in parts.
func (r WriteResult) add(o WriteResult) WriteResult {
	msg := r.RejectMsg
	if msg == "" {
		msg = o.RejectMsg
	} else if o.RejectMsg != "" {
		msg += "; " + o.RejectMsg
	}
	return WriteResult{Written: r.Written + o.Written, Rejected: r.Rejected + o.Rejected, RejectMsg: msg,
		RejectedSeriesLimit: r.RejectedSeriesLimit + o.RejectedSeriesLimit}
}
