package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// TestDaemonOverANetwork: chromafsd with Chroma 25 ms away (a proxy that
// adds a round trip to each request and two to each new connection, and
// refuses what Chroma Cloud refuses). Its attach log counts the requests
// an attach waited for, and the proxy agrees; a new view of a loaded
// collection, and another attachment of a view, send none; what the
// views show equals the local copy; nothing is refused.
func TestDaemonOverANetwork(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Private: 3, Seed: 49})
	p, err := harness.StartCloudProxy(env.url, harness.WithRTT(25*time.Millisecond))
	must(t, err)
	t.Cleanup(p.Close)
	d := startDaemon(t, "--chroma-url", p.URL, "--refresh", "30s", "--prefetch", "none") // the last of a flag wins
	public, team := filepath.Join(parent, "public"), filepath.Join(parent, "team")
	visibleCopy(t, src, public, false)
	visibleCopy(t, src, team, true)

	attached := regexp.MustCompile(`msg=attached .*chroma_requests=(\d+) chroma_round_trips=(\d+)`)
	attach := func(dir string, groups string) (requests, logged, trips int) {
		t.Helper()
		before := p.Requests.Load()
		path := d.dirFor(0, dir)
		if out, code := d.run(0, "attach", "--collection", name, "--groups", groups, path); code != 0 {
			t.Fatalf("attach %s: exit %d %s", dir, code, out)
		}
		b, err := os.ReadFile(d.logFile)
		must(t, err)
		all := attached.FindAllStringSubmatch(string(b), -1)
		if len(all) == 0 {
			t.Fatalf("no attach log line counts its requests:\n%s", b)
		}
		last := all[len(all)-1]
		logged, _ = strconv.Atoi(last[1])
		trips, _ = strconv.Atoi(last[2])
		return int(p.Requests.Load() - before), logged, trips
	}
	// the daemon keeps a connection open (chroma.Pool's heartbeat): the
	// first attach pays no handshake
	waitFor(t, 10*time.Second, func() bool { return p.Heartbeats.Load() > 0 }, func() string { return "no heartbeat from the daemon" })
	conns := p.Conns.Load()
	first, logged, trips := attach("first", "")
	if n := p.Conns.Load() - conns; n != 0 {
		t.Errorf("the first attach opened %d connections, want none (the daemon's pool keeps one open)", n)
	}
	t.Logf("first attach of the collection: %d requests, %d round trips one after another (the proxy saw %d)", logged, trips, first)
	if first == 0 || logged != first || trips == 0 || trips > logged {
		t.Errorf("first attach: the log counts %d requests in %d round trips, the proxy saw %d: want them equal and not 0", logged, trips, first)
	}
	if trips > 2 { // issue 31: the collection and its tree, two requests at most
		t.Errorf("first attach of the collection waited for %d round trips, want at most 2", trips)
	}
	for _, c := range []struct{ dir, groups, what string }{
		{"again", "", "another attachment of the view"},
		{"team", "team", "a new view of the loaded collection"},
	} {
		if n, logged, _ := attach(c.dir, c.groups); n != 0 || logged != 0 {
			t.Errorf("%s: %d requests to Chroma (the log says %d), want none", c.what, n, logged)
		}
	}
	const walk = "find . -type f | sort | xargs md5sum"
	for dir, local := range map[string]string{"first": public, "team": team} {
		if got, want := mustSh(t, filepath.Join(d.dir, dir), walk), mustSh(t, local, walk); got != want {
			t.Errorf("%s: %s", dir, firstDiff(got, want))
		}
	}
	if n := p.Violations(); n != 0 {
		t.Errorf("%d requests Chroma Cloud would refuse", n)
	}
	fmt.Printf("BENCH network 25ms: first attach %d requests in %d round trips; %d connections for %d requests\n", logged, trips, p.Conns.Load(), p.Requests.Load())
}

// TestMountOverANetwork: chromafs-mount with Chroma 25 ms away: its
// "mounted" log line counts the requests it waited for before it
// answered, cold (a fresh host cache) and warm (the tree's snapshot in
// the host tier), no more than the proxy saw; it serves the local copy.
func TestMountOverANetwork(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 300, Seed: 50})
	doc, err := openStore(t, name).LoadTree(t.Context())
	must(t, err)
	if n := len(chroma.TreeIDs(string(doc))) - 1; n < 2 {
		t.Fatalf("the test needs a tree in parts; it is in %d", n)
	}
	p, err := harness.StartCloudProxy(env.url, harness.WithRTT(25*time.Millisecond))
	must(t, err)
	t.Cleanup(p.Close)
	cache := t.TempDir()
	mounted := regexp.MustCompile(`msg=mounted .*chroma_requests=(\d+) chroma_round_trips=(\d+)`)
	counts := map[string][2]int{}
	for _, run := range []string{"cold", "warm"} {
		mnt := mountDir(t, t.TempDir())
		before := p.Requests.Load()
		m := startMountEnv(t, nil, name, mnt, p.URL, "--cache-dir", cache, "--prefetch", "none")
		seen := int(p.Requests.Load() - before)
		got := mounted.FindStringSubmatch(m.logs.String())
		if got == nil {
			t.Fatalf("%s: no mounted line counts its requests:\n%s", run, m.logs)
		}
		requests, _ := strconv.Atoi(got[1])
		trips, _ := strconv.Atoi(got[2])
		counts[run] = [2]int{requests, trips}
		if requests > seen || trips > requests || (run == "cold" && trips == 0) {
			t.Errorf("%s mount: the log counts %d requests in %d round trips, the proxy saw %d by then", run, requests, trips, seen)
		}
		if run == "warm" {
			waitMetric(t, m, "chromafs_tree_last_poll_timestamp_seconds", 1) // the check, right after
			// a poll that finds nothing new: one request
			before, polls := p.Requests.Load(), m.metric(t, "chromafs_tree_polls_total")
			must(t, m.Cmd.Process.Signal(syscall.SIGHUP))
			waitFor(t, 10*time.Second, func() bool {
				return m.metric(t, "chromafs_tree_polls_total") > polls && m.metric(t, "chromafs_tree_last_poll_timestamp_seconds") > 0 && p.Requests.Load() > before
			}, func() string { return "no poll after SIGHUP" })
			time.Sleep(100 * time.Millisecond) // anything else the poll sent would have reached the proxy (4 round trips)
			if n := p.Requests.Load() - before; n != 1 || m.metric(t, "chromafs_tree_refreshes_total") != 0 {
				t.Errorf("a poll that found nothing new sent %d requests, want 1 (and no refresh)", n)
			}
		}
		sameOutput(t, mnt, src, "find . -type f | sort | xargs md5sum")
		m.stop(t)
	}
	if counts["cold"][1] > 2 { // issue 31: the collection and its tree (its header and parts at once), two requests at most
		t.Errorf("a cold mount waited for %d round trips, want at most 2", counts["cold"][1])
	}
	if counts["warm"][0] != 0 { // issue 31: the version served last, checked after
		t.Errorf("a warm mount waited for %d requests (%d round trips), want none", counts["warm"][0], counts["warm"][1])
	}
	daemonAdoptsItsParentsConnection(t, p, name, src)
	if n := p.Violations(); n != 0 {
		t.Errorf("%d requests Chroma Cloud would refuse", n)
	}
	fmt.Printf("BENCH network 25ms: chromafs-mount cold %d requests in %d round trips, warm %d in %d\n", counts["cold"][0], counts["cold"][1], counts["warm"][0], counts["warm"][1])
}

// daemonAdoptsItsParentsConnection mounts with --daemon on a cold host
// through p: the serving process's requests go out on the connection its
// parent opened while it started (issue 31: the handshakes start a
// process start earlier), and it serves what the local copy holds.
func daemonAdoptsItsParentsConnection(t *testing.T, p *harness.CloudProxy, name, src string) {
	t.Helper()
	mnt := mountDir(t, t.TempDir())
	logFile := filepath.Join(t.TempDir(), "mount.log")
	conns := p.Conns.Load()
	out, code, _ := mountCmd(t, "--daemon", "--chroma-url", p.URL, "--collection", name, "--prefetch", "none", "--log-file", logFile, mnt)
	if code != 0 {
		t.Fatalf("--daemon: exit %d: %s", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mnt).Run() })
	conns = p.Conns.Load() - conns
	logs, err := os.ReadFile(logFile)
	must(t, err)
	line := regexp.MustCompile(`msg=mounted .*chroma_round_trips=(\d+) .*chroma_conn=(\w+)`).FindStringSubmatch(string(logs))
	if line == nil {
		t.Fatalf("no mounted line says where its connection came from:\n%s", logs)
	}
	if line[2] != "parent" || conns != 1 {
		t.Errorf("--daemon's cold mount: chroma_conn=%s over %d connections, want the parent's, alone", line[2], conns)
	}
	if trips, _ := strconv.Atoi(line[1]); trips == 0 || trips > 2 {
		t.Errorf("--daemon's cold mount waited for %d round trips, want 1 or 2", trips)
	}
	sameOutput(t, mnt, src, "find . -type f | sort | xargs md5sum")
	pid := daemonPid(t, mnt)
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	waitExit(t, pid)
}
