package remote

type span = struct{ idFrom, idTo, sFrom, sTo int }

func (d *WriteDecoder) spanScratch() []span      { return d.spans }
func (d *WriteDecoder) saveSpanScratch(s []span) { d.spans = s[:0] }
