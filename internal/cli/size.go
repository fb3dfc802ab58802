package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units ParseSize takes, longest suffix first within a
// family so that "MiB" is not read as "B". K, M, G and T are the binary
// units (as in --cache-size 1G), KB, MB, GB and TB the decimal ones.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

// maxSize is the largest size taken (1 PiB): anything more is a typo.
const maxSize = 1 << 50

// SizeUnits says which units ParseSize takes, for messages.
const SizeUnits = "B, KiB, MiB, GiB, TiB (or K, M, G, T), KB, MB, GB, TB (powers of 1000); case does not matter"

// ParseSize reads a positive byte size: "256MiB", "1G", "1TB", "4096"
// (bytes). Units are matched without regard to case.
func ParseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if len(num) >= len(u.suffix) && strings.EqualFold(num[len(num)-len(u.suffix):], u.suffix) {
			num, mult = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("%q is not a positive size: want a number and a unit, like 256MiB or 1TB (units: %s)", s, SizeUnits)
	case f <= 0:
		return 0, fmt.Errorf("%q is not a positive size (want one like 256MiB or 1GiB)", s)
	case f*float64(mult) > maxSize:
		return 0, fmt.Errorf("%q is more than 1PiB", s)
	}
	return int64(f * float64(mult)), nil
}
