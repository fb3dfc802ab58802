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
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", run, "./integration_test/")
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
