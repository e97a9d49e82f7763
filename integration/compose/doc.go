// Package compose tests the docker compose cluster of the repository root
// (docker-compose.yml, Dockerfile, deploy/): it builds the FROM scratch
// image, starts the three-node cluster, and drives it the way the README's
// "Local cluster" walk-through does: remote write and read at majority, a
// node stopped and started, node 4 added and removed with the placement
// CLI. It skips, saying why, when docker or compose is missing, in -short
// mode, or with TESSERA_COMPOSE_TEST=0.
package compose
