#!/usr/bin/env bash
# Builds the static tessera binary and the FROM scratch image around it.
# Nothing is pulled from a registry.
#
#   deploy/build.sh                      # bin/tessera and image tessera:local
#   TESSERA_IMAGE=tessera:dev TESSERA_BIN=/tmp/tessera deploy/build.sh
#
# GO names the go command (default: go on PATH). TESSERA_VERSION overrides
# the version stamped into the binary (default: git describe, or "devel"
# outside a git checkout); `tessera version` and the node's
# /api/v1/status/buildinfo report it with the commit.
set -euo pipefail
cd "$(dirname "$0")/.."

image="${TESSERA_IMAGE:-tessera:local}"
bin="${TESSERA_BIN:-bin/tessera}"
go="${GO:-go}"

mkdir -p "$(dirname "$bin")"
# Static (no libc: the image has none), without local paths, VCS stamping
# off so it builds from a tarball or a worktree too; the version and commit
# go in through the linker instead.
version="${TESSERA_VERSION:-$(git describe --tags --dirty 2>/dev/null || echo devel)}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
date="$(git log -1 --format=%cI 2>/dev/null || true)"
pkg=github.com/tessera-tsdb/tessera/internal/version
CGO_ENABLED=0 "$go" build -buildvcs=false -trimpath \
  -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Revision=$revision -X $pkg.Date=$date" \
  -o "$bin" ./cmd/tessera

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/tessera"
mkdir "$ctx/config"
cp deploy/compose/*.yml "$ctx/config/"
docker build --quiet -f Dockerfile -t "$image" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" "$ctx" >/dev/null
echo "built $bin ($("$bin" version)) and image $image"
