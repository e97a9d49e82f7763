package rpc

// HealthRequest asks a node whether it is up and ready. It has no fields.
type HealthRequest struct{}

// HealthResponse says who answered and whether it is ready to serve: a
// node is ready once every shard it owns is bootstrapped (the same test as
// the HTTP /ready endpoint); Message says what it is waiting for.
type HealthResponse struct {
	NodeID  string
	Ready   bool
	Message string
}

// Size implements Message.
func (m *HealthRequest) Size() int { return 1 }

// MarshalAppend implements Message. Layout: version only.
func (m *HealthRequest) MarshalAppend(dst []byte) []byte { return append(dst, wireVersion) }

// Unmarshal implements Message.
func (m *HealthRequest) Unmarshal(b []byte) error { return newReader("HealthRequest", b).done() }

// Size implements Message.
func (m *HealthResponse) Size() int { return 2 + bytesLen(len(m.NodeID)) + bytesLen(len(m.Message)) }

// MarshalAppend implements Message. Layout: version, node ID, ready byte
// (0 or 1), message.
func (m *HealthResponse) MarshalAppend(dst []byte) []byte {
	dst = append(dst, wireVersion)
	dst = appendString(dst, m.NodeID)
	ready := byte(0)
	if m.Ready {
		ready = 1
	}
	dst = append(dst, ready)
	return appendString(dst, m.Message)
}

// Unmarshal implements Message.
func (m *HealthResponse) Unmarshal(b []byte) error {
	r := newReader("HealthResponse", b)
	m.NodeID = r.string("node id")
	switch r.u8("ready") {
	case 0:
		m.Ready = false
	case 1:
		m.Ready = true
	default:
		r.fail("ready byte is neither 0 nor 1")
	}
	m.Message = r.string("message")
	return r.done()
}
