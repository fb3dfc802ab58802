//go:build race

package hostcache

// raceEnabled: under the race detector sync.Pool drops a share of what it
// is given, on purpose (ours, and zstd's inside Decode), so allocations
// that pools save cannot be counted.
const raceEnabled = true
