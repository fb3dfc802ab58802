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
// the sample named name, truncated to an integer. A name is the sample's
// whole first field: with labels, written as the page writes them
// (`m{collection="docs"}`), whose values hold no space.
func Metric(url, name string) (int64, error) {
	all, err := Metrics(url, name)
	if err != nil {
		return 0, err
	}
	return all[name], nil
}

// Metrics fetches the Prometheus text page at url once and returns the
// values of the samples named (as Metric names them), truncated to
// integers: values of one scrape, consistent with each other as far as
// the page is.
func Metrics(url string, names ...string) (map[string]int64, error) {
	resp, err := scraper.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	got := make(map[string]int64, len(names))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && want[f[0]] {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return nil, fmt.Errorf("metric %s: %w", f[0], err)
			}
			got[f[0]] = int64(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			return nil, fmt.Errorf("%s: %w", n, ErrNoMetric)
		}
	}
	return got, nil
}
