package commitlog

import "github.com/uber-go/tally/v4"

type metrics struct {
	bytesWritten   tally.Counter
	fsyncs         tally.Counter
	records        tally.Counter
	entries        tally.Counter
	rotations      tally.Counter
	corruptTails   tally.Counter
	truncatedBytes tally.Counter
	writeErrors    tally.Counter

	corruptFiles      tally.Counter
	skippedBytes      tally.Counter
	skippedRecords    tally.Counter
	unresolvedEntries tally.Counter
	queueFull         tally.Counter
}

func newMetrics(s tally.Scope) metrics {
	return metrics{
		bytesWritten:   s.Counter("bytes_written"),
		fsyncs:         s.Counter("fsyncs"),
		records:        s.Counter("records"),
		entries:        s.Counter("entries"),
		rotations:      s.Counter("rotations"),
		corruptTails:   s.Counter("corrupt_tails"),
		truncatedBytes: s.Counter("truncated_bytes"),
		writeErrors:    s.Counter("write_errors"),

		corruptFiles:      s.Counter("corrupt_files"),
		skippedBytes:      s.Counter("skipped_bytes"),
		skippedRecords:    s.Counter("skipped_records"),
		unresolvedEntries: s.Counter("unresolved_entries"),
		queueFull:         s.Counter("queue_full"),
	}
}
