//go:build !race

package promapi

const raceEnabled = false
