#!/usr/bin/env bash
# Regenerates the Go code of the node RPC protobuf definitions
# (dbnode/rpc/nodepb). Tool versions are pinned so that running it twice,
# or on another machine, gives the same files:
#   protoc               Debian's protobuf-compiler (libprotoc 3.21.12)
#   protoc-gen-go        google.golang.org/protobuf, the version in go.mod
#   protoc-gen-go-grpc   google.golang.org/grpc/cmd/protoc-gen-go-grpc
# The plugins are installed into a temporary GOBIN, never onto PATH.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
PROTOC_VERSION="libprotoc 3.21.12"

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if ! command -v protoc >/dev/null; then
	apt-get update -qq && apt-get install -y -qq protobuf-compiler
fi
if [[ "$(protoc --version)" != "$PROTOC_VERSION" ]]; then
	echo "genproto: want protoc '$PROTOC_VERSION', have '$(protoc --version)'" >&2
	exit 1
fi

gobin="$(mktemp -d)"
trap 'rm -rf "$gobin"' EXIT
GOBIN="$gobin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
GOBIN="$gobin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"

for dir in dbnode/rpc/nodepb; do
	protoc \
		--plugin=protoc-gen-go="$gobin/protoc-gen-go" \
		--plugin=protoc-gen-go-grpc="$gobin/protoc-gen-go-grpc" \
		--proto_path="$dir" \
		--go_out="$dir" --go_opt=paths=source_relative \
		--go-grpc_out="$dir" --go-grpc_opt=paths=source_relative \
		"$dir"/*.proto
done
