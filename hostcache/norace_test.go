//go:build !race

package hostcache

const raceEnabled = false
