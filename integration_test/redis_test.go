package integration_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/testenv"
)

// redisServer is a real redis-server (Debian's package) on a free port,
// with nothing persisted, stopped at the end of the test.
type redisServer struct {
	port int
	cmd  *exec.Cmd
}

func startRedis(t *testing.T, port int) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server not found (apt install redis-server)")
	}
	if port == 0 {
		port, err = freePort()
		must(t, err)
	}
	r := &redisServer{port: port}
	r.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--protected-mode", "no")
	must(t, r.cmd.Start())
	t.Cleanup(r.stop)
	waitFor(t, 10*time.Second, r.answers, func() string { return fmt.Sprintf("redis-server on port %d did not answer PING", port) })
	return r
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisServer) answers() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprint(c, "PING\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line == "+PONG\r\n"
}

// dbsize is the number of keys in the server's database 0.
func (r *redisServer) dbsize(t *testing.T) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	must(t, err)
	defer c.Close()
	must(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	fmt.Fprint(c, "DBSIZE\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	must(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, ":")))
	if err != nil {
		t.Fatalf("DBSIZE answered %q", line)
	}
	return n
}

func (r *redisServer) stop() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// TestRedisTwoHosts: two hosts (two cache directories) share one Redis; the
// second host's session reads what the first fetched, from Redis, and pulls
// almost nothing from Chroma. The read deadline is a second, not the default
// 50ms: what is tested is the sharing, and on a loaded 2-core runner one read
// past 50ms rests the tier for a second by design (TestRedisFaults tests the
// deadline and the rest), so no Redis error is allowed here.
func TestRedisTwoHosts(t *testing.T) {
	requireFUSE(t)
	r := startRedis(t, 0)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 300, Large: []int64{3 << 20}, Seed: 61})
	readOnlyTree(t, src)
	mnt := mountDir(t, parent)
	corpusBytes := dirBytes(t, src)

	hostA := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", t.TempDir(), "--cache-redis", r.url(), "--cache-redis-timeout", "1s")
	runSession(t, mnt, src, "host A")
	pulledA := hostA.metric(t, "chromafs_fetched_bytes_total")
	hostA.stop(t) // a clean exit sends what is still queued for Redis
	keysA := r.dbsize(t)

	hostB := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", t.TempDir(), "--cache-redis", r.url(), "--cache-redis-timeout", "1s")
	runSession(t, mnt, src, "host B")
	pulledB := hostB.metric(t, "chromafs_fetched_bytes_total")
	hits := hostB.metric(t, "chromafs_redis_cache_hits_total")
	fmt.Printf("BENCH two hosts, one Redis: host A pulled %.0f%% of the corpus from Chroma, host B %.1f%% (%d Redis hits)\n",
		100*float64(pulledA)/float64(corpusBytes), 100*float64(pulledB)/float64(corpusBytes), hits)
	if keysA < 300 {
		t.Errorf("host A left %d entries in Redis, want the 300 small pages at least", keysA)
	}
	if pulledB*20 > corpusBytes {
		t.Errorf("host B pulled %d bytes of a %d-byte corpus from Chroma; want at most 5%%", pulledB, corpusBytes)
	}
	if hits < 300 {
		t.Errorf("%d Redis hits on host B, want the 300 small pages at least", hits)
	}
	if n := hostB.metric(t, "chromafs_redis_cache_errors_total"); n != 0 {
		t.Errorf("%d Redis errors on host B with a 1s deadline on loopback", n)
	}
	if t.Failed() {
		t.Logf("host A left %d entries; host B: %d misses, %d errors, %d operations skipped", keysA,
			hostB.metric(t, "chromafs_redis_cache_misses_total"), hostB.metric(t, "chromafs_redis_cache_errors_total"),
			hostB.metric(t, "chromafs_redis_cache_skipped_total"))
	}
}

// TestRedisFaults: Redis killed during a session, then restarted, or a
// server that answers garbage: reads stay right and never fail, and a dead
// Redis costs little time.
func TestRedisFaults(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 120, Large: []int64{1 << 20}, Seed: 67})
	readOnlyTree(t, src)
	mnt := mountDir(t, parent)
	pages := sourcePages(t, src)

	t.Run("killed and restarted", func(t *testing.T) {
		r := startRedis(t, 0)
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", t.TempDir(), "--cache-redis", r.url(), "--prefetch", "none")
		sameOutput(t, mnt, src, "cat "+pages[0])
		r.stop()
		sameOutput(t, mnt, src, "cat "+pages[1]) // Redis down: read from Chroma
		if n := m.metric(t, "chromafs_redis_cache_errors_total"); n == 0 {
			t.Error("no Redis error counted with Redis killed")
		}
		startRedis(t, r.port)
		// the tier rests a second after a failure: read uncached pages until
		// one is asked of Redis again (a miss counted), each byte-exact
		next := 2
		waitFor(t, 10*time.Second, func() bool {
			if next == len(pages) {
				return false // every page read: only the deadline is left
			}
			before := m.metric(t, "chromafs_redis_cache_misses_total")
			sameOutput(t, mnt, src, "cat "+pages[next])
			next++
			return m.metric(t, "chromafs_redis_cache_misses_total") > before
		}, func() string {
			return fmt.Sprintf("the same mount does not use Redis again once it is back (%d pages read)", next-2)
		})
	})

	t.Run("garbage server", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					for {
						if _, err := c.Read(buf); err != nil {
							return
						}
						c.Write([]byte("%%garbage%%\r\n\x00\xff"))
					}
				}()
			}
		}()
		url := fmt.Sprintf("redis://%s/0", l.Addr())
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", t.TempDir(), "--cache-redis", url)
		start := time.Now()
		runSession(t, mnt, src, "garbage Redis")
		d := time.Since(start)
		if d > 20*time.Second { // a guard against a hang; the counts below are the proof
			t.Errorf("the session took %s with a garbage Redis; a failing tier must cost little", d)
		}
		// an error rests reads (and the writer) for a second: each second
		// Redis is asked by the reads in flight when a rest ends (up to
		// --host-requests, 8, and one) and by the writer, and skipped
		// otherwise; without the rests every read would be an error
		errs, skipped := m.metric(t, "chromafs_redis_cache_errors_total"), m.metric(t, "chromafs_redis_cache_skipped_total")
		if most := (8 + 1 + 1) * (int64(d/time.Second) + 1); errs == 0 || errs > most || skipped == 0 {
			t.Errorf("a session of %s against a garbage Redis: %d errors (want 1 to %d), %d skipped (want some)", d.Round(time.Millisecond), errs, most, skipped)
		}
		t.Logf("a session of %s against a garbage Redis: %d errors, %d reads skipped", d.Round(time.Millisecond), errs, skipped)
	})

	t.Run("password in the URL refused", func(t *testing.T) {
		dir := filepath.Join(parent, "nowhere")
		must(t, os.MkdirAll(dir, 0o755))
		out, code, _ := mountCmd(t, "--chroma-url", env.url, "--collection", name, "--cache-redis", "redis://:hunter2@127.0.0.1:1/0", dir)
		if code == 0 || !strings.Contains(out, "never on the command line") || strings.Contains(out, "hunter2") {
			t.Errorf("exit %d, %q: want a refusal that does not repeat the password", code, out)
		}
	})
}
