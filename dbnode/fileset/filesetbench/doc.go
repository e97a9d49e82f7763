// Package filesetbench measures filesets on realistic payloads: sealed
// streams (dbnode/encoding) of generated node_exporter series. It is a
// package of its own so that the fileset package's tests do not depend on
// the encoding package.
package filesetbench
