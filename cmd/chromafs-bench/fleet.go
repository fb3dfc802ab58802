package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// benchFleet runs the integration tests that measure many mounts of one
// host behind a proxy enforcing Chroma Cloud's read quotas, and two hosts
// sharing one Redis, against this run's server, and reports their BENCH
// lines: the quota proxy lives next to the fault proxy in integration_test.
func benchFleet(c *config, r *report) error {
	for _, mounts := range []string{"12", "50"} {
		logf("fleet of %s mounts", mounts)
		lines, err := benchTest(c, "^TestFleetWithinQuota$", "CHROMAFS_FLEET_MOUNTS="+mounts)
		if err != nil {
			return err
		}
		for _, l := range lines {
			r.value(mounts+" mounts", "one host, the session at once, through a Chroma Cloud quota proxy", strings.TrimPrefix(l, "fleet: "),
				pass(strings.Contains(l, " 0 failed sessions, 0 reads refused"), "0 failed, 0 quota violations"))
		}
	}
	logf("two hosts, one Redis")
	lines, err := benchTest(c, "^TestRedisTwoHosts$")
	for _, l := range lines {
		r.value("2 hosts", "one Redis: the second host's session", strings.TrimPrefix(l, "two hosts, one Redis: "), "≤ 5% pulled (asserted by the test)")
	}
	return err
}

// benchTest runs one integration test against the bench's server and
// returns its BENCH lines; a failing test is an error.
func benchTest(c *config, run string, env ...string) ([]string, error) {
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "2h", "-v", "-run", run, "./integration_test/")
	cmd.Dir = c.root
	// the mounts built without -race (the tests build them with it): the figures are
	// the production binary's
	cmd.Env = append(append(os.Environ(), "CHROMAFS_TEST_URL="+c.url, "CHROMAFS_TEST_RACE=0"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -run %s: %v\n%s", run, err, lastLines(out, 30))
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "BENCH "); ok {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// sitesScale is the host of many sites benchSites measures (issue 32):
// the environment of integration_test's TestManySites.
var sitesScale = []string{
	"CHROMAFS_SITES=1000", "CHROMAFS_SITE_MIN_PAGES=50", "CHROMAFS_SITE_MAX_PAGES=500", "CHROMAFS_SITE_MAX_KIB=4",
	"CHROMAFS_SITE_BIG_PAGES=10000", "CHROMAFS_SITE_BIG_EVERY=200", "CHROMAFS_SITE_CONVERSATIONS=1500",
	"CHROMAFS_SITE_GAP_MS=200", "CHROMAFS_SITE_WORKERS=4", "CHROMAFS_SITE_MEMORY=128MiB",
}

// benchSites runs TestManySites at scale: one chromafsd, a thousand sites
// under one memory budget, conversations on Zipf-distributed sites through
// the quota proxy; it reports the test's BENCH lines and judges the
// issue's targets from its figures.
func benchSites(c *config, r *report) error {
	logf("many sites: %s", strings.Join(sitesScale, " "))
	lines, err := benchTest(c, "^TestManySites$", sitesScale...)
	if err != nil {
		return err
	}
	const label = "1000 sites"
	err = reportFigures(r, label, lines, "sites figures", func(value string) error {
		var loaded, evicted, unseen, growth, growthMiB, boundMiB, gc float64
		var violations int
		if _, err := fmt.Sscanf(value, "loaded_p99_ms=%f evicted_p99_ms=%f unseen_p99_ms=%f rss_growth_over_budget=%f rss_growth_mib=%f rss_bound_mib=%f gc_share=%f violations=%d",
			&loaded, &evicted, &unseen, &growth, &growthMiB, &boundMiB, &gc, &violations); err != nil {
			return fmt.Errorf("TestManySites' figures %q: %w", value, err)
		}
		r.value(label, "attach of a loaded view, p99", fmt.Sprintf("%.1f ms", loaded), pass(loaded >= 0 && loaded <= 30, "≤ 30 ms"))
		r.value(label, "attach of a view dropped for memory (loaded again from the host tier), p99", fmt.Sprintf("%.1f ms", evicted), pass(evicted >= 0 && evicted <= 50, "≤ 50 ms"))
		r.value(label, "attach of a site never seen (its tree from Chroma), p99", fmt.Sprintf("%.1f ms", unseen), "")
		r.value(label, "daemon RSS growth (peak less serving nothing)", fmt.Sprintf("%.1f MiB (%.2fx --memory)", growthMiB, growth), pass(growthMiB <= boundMiB, fmt.Sprintf("≤ --memory + 15%% + 64 MiB = %.1f MiB", boundMiB)))
		r.value(label, "the collector's share of the daemon's CPU", fmt.Sprintf("%.1f%%", 100*gc), pass(gc <= 0.10, "≤ 10%"))
		r.value(label, "requests Chroma Cloud would refuse", fmt.Sprint(violations), pass(violations == 0, "0"))
		return nil
	})
	if err != nil {
		return err
	}
	return benchStall(c, r)
}

// benchStall runs TestStalledTenantStallsNoOther with 200 attaches each
// side: one collection's first attach stalled (its server holds the
// reads) while another collection's loaded view is attached.
func benchStall(c *config, r *report) error {
	logf("a stalled tenant")
	lines, err := benchTest(c, "^TestStalledTenantStallsNoOther$", "CHROMAFS_STALL_ATTACHES=200")
	if err != nil {
		return err
	}
	const label = "2 sites"
	return reportFigures(r, label, lines, "tenants figures", func(value string) error {
		var p99, p50 float64
		if _, err := fmt.Sscanf(value, "p99_ratio=%f p50_ratio=%f", &p99, &p50); err != nil {
			return fmt.Errorf("TestStalledTenantStallsNoOther's figures %q: %w", value, err)
		}
		r.value(label, "attach of a loaded view while another site's first attach is stalled ÷ before the stall, p99 (200 each)", fmt.Sprintf("%.2fx (p50 %.2fx)", p99, p50), pass(p99 <= 1.5, "≤ 1.5x"))
		return nil
	})
}

// reportFigures reports a test's BENCH lines under label, all but the
// one named figures (its machine-readable figures), which judge reads.
func reportFigures(r *report, label string, lines []string, figures string, judge func(value string) error) error {
	for _, l := range lines {
		what, value, _ := strings.Cut(l, ": ")
		if what != figures {
			r.value(label, what, value, "")
			continue
		}
		if err := judge(value); err != nil {
			return err
		}
	}
	return nil
}
