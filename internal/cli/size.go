package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a positive byte size: "256MiB", "1G", "4096".
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1000}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f*float64(mult) > 1<<50 {
		return 0, fmt.Errorf("%q is not a positive size like 256MiB or 1GiB", s)
	}
	return int64(f * float64(mult)), nil
}
