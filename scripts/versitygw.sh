#!/usr/bin/env bash
# versitygw (Apache 2.0): an S3 gateway over a local directory, the real S3
# server the backup tests (backup/s3_test.go) and manual backup runs use.
#
#   scripts/versitygw.sh install              go install it (pinned version)
#   scripts/versitygw.sh serve DIR [PORT]     serve DIR over S3 on 127.0.0.1:PORT
#                                             (default 25090) with a bucket
#                                             "tessera", until interrupted;
#                                             prints the bucket config to use
#
# The tests find the binary at $TESSERA_VERSITYGW, on PATH, or in
# $(go env GOPATH)/bin.
set -euo pipefail
VERSION=v1.8.0
case "${1:-}" in
install)
	go install "github.com/versity/versitygw/cmd/versitygw@${VERSION}"
	echo "installed $(go env GOPATH)/bin/versitygw"
	;;
serve)
	dir="${2:?usage: $0 serve DIR [PORT]}"
	port="${3:-25090}"
	bin="${TESSERA_VERSITYGW:-$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")}"
	mkdir -p "$dir/tessera"
	cat <<YAML
# bucket.yml for tessera backup --bucket-config:
type: S3
config:
  bucket: tessera
  endpoint: 127.0.0.1:${port}
  access_key: tessera-key
  secret_key: tessera-secret
  insecure: true
YAML
	exec "$bin" -p "127.0.0.1:${port}" -a tessera-key -s tessera-secret posix "$dir"
	;;
*)
	echo "usage: $0 install | serve DIR [PORT]" >&2
	exit 2
	;;
esac
