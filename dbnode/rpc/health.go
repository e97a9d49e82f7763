package rpc

// HealthResponse says who answered and whether it is ready to serve: a
// node is ready once every shard it owns is bootstrapped (the same test as
// the HTTP /ready endpoint); Message says what it is waiting for.
type HealthResponse struct {
	NodeID  string
	Ready   bool
	Message string
}
