package placement

import "go.uber.org/goleak"

// etcdLeakIgnores lists goroutines the embedded etcd server and gRPC leave
// behind after a clean shutdown; they are not ours.
func etcdLeakIgnores() []goleak.Option {
	return []goleak.Option{}
}
