package harness

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrNoMetric is returned by Metric for a name the page does not hold.
var ErrNoMetric = errors.New("metric not found")

var scraper = &http.Client{Timeout: 10 * time.Second}

// Metric fetches the Prometheus text page at url and returns the value of
// the sample named name (no labels), truncated to an integer.
func Metric(url, name string) (int64, error) {
	resp, err := scraper.Get(url)
	if err != nil {
		return 0, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s: %w", name, err)
			}
			return int64(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	return 0, fmt.Errorf("%s: %w", name, ErrNoMetric)
}
