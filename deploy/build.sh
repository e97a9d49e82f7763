#!/usr/bin/env bash
# Builds the static tessera binary and the FROM scratch image around it.
# Nothing is pulled from a registry.
#
#   deploy/build.sh                      # bin/tessera and image tessera:local
#   TESSERA_IMAGE=tessera:dev TESSERA_BIN=/tmp/tessera deploy/build.sh
#
# GO names the go command (default: go on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

image="${TESSERA_IMAGE:-tessera:local}"
bin="${TESSERA_BIN:-bin/tessera}"
go="${GO:-go}"

mkdir -p "$(dirname "$bin")"
# Static (no libc: the image has none), without local paths, VCS stamping
# off so it builds from a tarball or a worktree too.
CGO_ENABLED=0 "$go" build -buildvcs=false -trimpath -ldflags "-s -w" -o "$bin" ./cmd/tessera

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/tessera"
mkdir "$ctx/config"
cp deploy/compose/*.yml "$ctx/config/"
docker build --quiet -f Dockerfile -t "$image" "$ctx" >/dev/null
echo "built $bin and image $image"
