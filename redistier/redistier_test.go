package redistier

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/internal/testenv"
)

func TestPasswordInURLRefused(t *testing.T) {
	_, err := Open(Config{URL: "redis://:s3cret@127.0.0.1:6379/0"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("URL with a password: %v", err)
	}
	if _, err := Open(Config{URL: "http://127.0.0.1:6379"}); err == nil {
		t.Error("a non-redis URL was accepted")
	}
}

// TestDeadRedisCostsLittle: with Redis down (nothing listens) or hung (it
// takes a GET and never answers), a Get fails within the read deadline,
// and the tier then rests: the next Gets are skipped without sending
// Redis anything, until the rest is over. The rest is judged by the
// tier's clock, frozen here: what is proved is that nothing is sent, not
// how fast.
func TestDeadRedisCostsLittle(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "redis://" + l.Addr().String() + "/0"
	l.Close() // nothing listens there now
	hung := startFake(t, func(args []string) string { return "" })
	for _, tc := range []struct{ name, url string }{{"down", down}, {"hung", hung.url()}} {
		t.Run(tc.name, func(t *testing.T) {
			// the client's own timeouts are an hour: only the read deadline
			// (30ms) can end a Get of a hung Redis before the test's end
			tier, err := Open(Config{URL: tc.url, Timeout: 30 * time.Millisecond, WriteTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer tier.Close()
			clock := newClock()
			tier.now = clock.now
			sent := countCommands(tier)
			k := cache.PageKey{Collection: "c", SHA256: strings.Repeat("a", 64)}
			testenv.Returns(t, "a Get of a dead Redis", func() {
				if _, ok := tier.Get(context.Background(), k, 10); ok {
					t.Error("a dead Redis served an entry")
				}
			})
			if n := sent.gets.Load(); n != 1 {
				t.Fatalf("%d GETs sent for one Get", n)
			}
			for range 100 {
				if _, ok := tier.Get(context.Background(), k, 10); ok {
					t.Fatal("a resting tier served an entry")
				}
			}
			if n := sent.gets.Load(); n != 1 {
				t.Errorf("%d GETs sent: the 100 Gets while resting reached Redis", n)
			}
			if st := tier.Stats(); st.Errors != 1 || st.Skipped != 100 {
				t.Errorf("stats %+v: want 1 error and the 100 Gets skipped", st)
			}
			// positive control: once the rest is over, a Get is sent again
			clock.advance(rest)
			testenv.Returns(t, "a Get after the rest", func() { tier.Get(context.Background(), k, 10) })
			if n, st := sent.gets.Load(), tier.Stats(); n != 2 || st.Errors != 2 || st.Skipped != 100 {
				t.Errorf("after the rest: %d GETs sent, stats %+v; want the Get sent and failed", n, st)
			}
			if tc.name == "down" { // (a hung Redis would hold Close for the write's hour)
				testenv.Returns(t, "a Put", func() { tier.Put(k, []byte("0123456789")) }) // queued for the writer: never blocks
			}
		})
	}
}

// clock is a tier's clock that moves only when told.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// sentCommands counts the GETs and SETs a tier's client sends (or tries
// to: a command whose dial fails is counted); onSet, when set, is given
// the n-th SET and sends it (or not) itself.
type sentCommands struct {
	gets, sets atomic.Int64
	onSet      func(ctx context.Context, n int64, send func(context.Context) error) error
}

// countCommands hooks a counter into tier's client (before any command).
func countCommands(tier *Tier) *sentCommands {
	c := &sentCommands{}
	tier.client.AddHook(c)
	return c
}

func (c *sentCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *sentCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch strings.ToUpper(cmd.Name()) {
		case "GET":
			c.gets.Add(1)
		case "SET":
			if n := c.sets.Add(1); c.onSet != nil {
				return c.onSet(ctx, n, func(ctx context.Context) error { return next(ctx, cmd) })
			}
		}
		return next(ctx, cmd)
	}
}

func (c *sentCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGarbageServer: a server answering nonsense is a failure, not a hit.
func TestGarbageServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					c.Write([]byte("$5\r\nhello\r\n")) // a well-formed string that is no entry
				}
			}()
		}
	}()
	tier, err := Open(Config{URL: "redis://" + l.Addr().String() + "/0", Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	k := cache.PageKey{Collection: "c", SHA256: strings.Repeat("b", 64)}
	if data, ok := tier.Get(context.Background(), k, 5); ok {
		t.Fatalf("garbage served as an entry: %q", data)
	}
	if st := tier.Stats(); st.Hits != 0 || st.Errors+st.Corrupt == 0 {
		t.Errorf("stats %+v: want the answer counted as an error or a corrupt entry", st)
	}
}

// fakeRedis is a RESP server for the tier's own logic: it answers each
// command with reply(args) ("" for no answer at all) and reports the
// SETs it answered on sets.
type fakeRedis struct {
	l     net.Listener
	reply func(args []string) string
	sets  chan string
}

func startFake(t *testing.T, reply func(args []string) string) *fakeRedis {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{l: l, reply: reply, sets: make(chan string, 100)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeRedis) url() string { return "redis://" + f.l.Addr().String() + "/0" }

func (f *fakeRedis) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			fmt.Fprint(c, "-ERR unknown command 'HELLO'\r\n") // RESP2 then
			continue
		case "CLIENT", "SELECT":
			fmt.Fprint(c, "+OK\r\n")
			continue
		}
		out := f.reply(args)
		if out == "" {
			continue
		}
		fmt.Fprint(c, out)
		if strings.EqualFold(args[0], "SET") && out == "+OK\r\n" {
			f.sets <- args[1]
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// pageKey names a part, whose digest Encode does not check against the key.
func pageKey(c byte) cache.PageKey {
	return cache.PageKey{Collection: "c", SHA256: strings.Repeat(string(c), 64), Part: "p"}
}

// TestWritesSurviveSlowReads: reads that time out (a busy host) rest the
// reads, not the writer: what was queued reaches Redis.
func TestWritesSurviveSlowReads(t *testing.T) {
	f := startFake(t, func(args []string) string {
		if strings.EqualFold(args[0], "GET") {
			return "" // never answered: the read times out
		}
		return "+OK\r\n"
	})
	tier, err := Open(Config{URL: f.url(), Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	if _, ok := tier.Get(context.Background(), pageKey('a'), 3); ok {
		t.Fatal("a timed-out Get served an entry")
	}
	for _, c := range []byte("abc") {
		tier.Put(pageKey(c), []byte("abc"))
	}
	for range 3 {
		select {
		case <-f.sets:
		case <-time.After(5 * time.Second):
			t.Fatalf("queued writes lost after a read timed out: %+v", tier.Stats())
		}
	}
	tier.Close() // the writer has counted what it sent
	if st := tier.Stats(); st.Writes != 3 || st.Errors != 1 {
		t.Errorf("stats %+v: want 3 writes and the one read's error", st)
	}
}

// failFirstSet answers the first SET with an error, every other command OK.
func failFirstSet() func(args []string) string {
	var n atomic.Int32
	return func(args []string) string {
		if strings.EqualFold(args[0], "SET") && n.Add(1) == 1 {
			return "-ERR out of memory\r\n"
		}
		return "+OK\r\n"
	}
}

// TestWriterWaitsOutItsRest: a failed write rests the writer for a
// second; the next queued entry is sent after it, not dropped. Redis
// itself checks, as the entry arrives, that the writer's rest is over.
func TestWriterWaitsOutItsRest(t *testing.T) {
	var tier atomic.Pointer[Tier]
	early := make(chan time.Duration, 1) // how long before the rest's end a write came
	fail := failFirstSet()
	f := startFake(t, func(args []string) string {
		out := fail(args)
		if strings.EqualFold(args[0], "SET") && out == "+OK\r\n" {
			if d := time.Until(time.Unix(0, tier.Load().writesDownUntil.Load())); d > 0 {
				early <- d
			}
		}
		return out
	})
	tr, err := Open(Config{URL: f.url()})
	if err != nil {
		t.Fatal(err)
	}
	tier.Store(tr)
	defer tr.Close()
	tr.Put(pageKey('a'), []byte("first"))
	tr.Put(pageKey('b'), []byte("second"))
	select {
	case <-f.sets:
	case <-time.After(5 * time.Second):
		t.Fatalf("the write after a failed one never came: %+v", tr.Stats())
	}
	select {
	case d := <-early:
		t.Errorf("the next write came %s before the writer's rest was over", d)
	default:
	}
	if st := tr.Stats(); st.Errors != 1 {
		t.Errorf("stats %+v: want the failed write counted (it rests the writer)", st)
	}
	tr.Close()
	if st := tr.Stats(); st.Writes != 1 || st.Errors != 1 {
		t.Errorf("stats %+v: want 1 failed write and 1 written", st)
	}
}

// TestCloseIsBounded: a Redis that never answers a write holds Close no
// longer than the drain's bound, and what is left is dropped. The first
// write is held until Close starts (then answered), so that the others
// are sent, if at all, during the drain: each with a deadline no later
// than the drain's end, and none once it is over. Writes of their own are
// given an hour here: only the drain's bound can end Close sooner.
func TestCloseIsBounded(t *testing.T) {
	f := startFake(t, func(args []string) string { return "" })
	tier, err := Open(Config{URL: f.url(), WriteTimeout: time.Hour, DrainTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sent := countCommands(tier)
	sent.onSet = func(ctx context.Context, n int64, send func(context.Context) error) error {
		if n == 1 {
			<-tier.closing
			return nil // answered as Close starts
		}
		if dl, ok := ctx.Deadline(); !ok || dl.UnixNano() > tier.drainBy.Load() {
			t.Errorf("write %d during the drain: deadline %v (set %v), after the drain's end %v", n, dl, ok, time.Unix(0, tier.drainBy.Load()))
			return context.DeadlineExceeded // not sent: it would wait its hour
		}
		return send(ctx)
	}
	for _, c := range []byte("abcdefgh") {
		tier.Put(pageKey(c), []byte("entry"))
	}
	waitFor(t, "the first write under way", func() bool { return sent.sets.Load() == 1 })
	testenv.Returns(t, "Close", tier.Close)
	// the one the drain may send never answers: it ends with the drain,
	// and nothing is sent after it
	if n := sent.sets.Load(); n > 2 {
		t.Errorf("%d writes sent: want the first and at most one during the drain", n)
	}
	if st := tier.Stats(); st.Writes != 1 || st.Skipped+st.Errors != 7 {
		t.Errorf("stats %+v: want the first written and the 7 others skipped (or one failed)", st)
	}
}

// TestQueueBoundedInBytes: entries beyond QueueBytes are dropped at once.
func TestQueueBoundedInBytes(t *testing.T) {
	block := make(chan struct{})
	f := startFake(t, func(args []string) string { <-block; return "+OK\r\n" })
	defer close(block)
	tier, err := Open(Config{URL: f.url(), QueueBytes: 4096, DrainTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	page := make([]byte, 1500)
	rand.Read(page) // incompressible
	for _, c := range []byte("abcdefgh") {
		tier.Put(pageKey(c), page)
	}
	if q := tier.queued.Load(); q > 4096 {
		t.Errorf("%d bytes queued with a bound of 4096", q)
	}
	if st := tier.Stats(); st.Skipped < 4 {
		t.Errorf("stats %+v: want most of 8 entries of ~1.5 KB dropped by a 4 KiB queue", st)
	}
}

// TestCloseWaitsOutAShortRest: a write that failed just before Close
// rests the writer; Close waits the rest out (it ends before the drain's
// bound) and sends what is queued.
func TestCloseWaitsOutAShortRest(t *testing.T) {
	f := startFake(t, failFirstSet())
	tier, err := Open(Config{URL: f.url()})
	if err != nil {
		t.Fatal(err)
	}
	tier.Put(pageKey('a'), []byte("first"))
	waitStats(t, tier, func(st Stats) bool { return st.Errors == 1 })
	tier.Put(pageKey('b'), []byte("second"))
	tier.Close()
	if st := tier.Stats(); st.Writes != 1 || st.Skipped != 0 {
		t.Errorf("stats %+v: want the entry queued during the rest written at Close", st)
	}
	tier.Put(pageKey('c'), []byte("after")) // skipped, no panic
	if st := tier.Stats(); st.Skipped != 1 {
		t.Errorf("stats %+v: want the Put after Close skipped", st)
	}
}

// TestCallerLeavingIsNoFailure: a Get whose caller gives up is a miss,
// not a failure: reads do not rest for it.
func TestCallerLeavingIsNoFailure(t *testing.T) {
	left := make(chan struct{}) // the first Get's caller has left
	var gets atomic.Int32
	f := startFake(t, func(args []string) string {
		if strings.EqualFold(args[0], "GET") {
			if gets.Add(1) == 1 {
				<-left // answered only once its caller has gone
			}
			return "$-1\r\n"
		}
		return "+OK\r\n"
	})
	tier, err := Open(Config{URL: f.url(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, ok := tier.Get(ctx, pageKey('a'), 3); ok {
		t.Fatal("a Get given up served an entry")
	}
	close(left)
	if _, ok := tier.Get(context.Background(), pageKey('a'), 3); ok {
		t.Fatal("a miss served an entry")
	}
	if st := tier.Stats(); st.Errors != 0 || st.Skipped != 0 || st.Misses != 1 {
		t.Errorf("stats %+v: want no error, nothing skipped, the second Get's miss", st)
	}
}

// waitStats polls the tier's counters until ok, for at most 5 s.
func waitStats(t *testing.T, tier *Tier, ok func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(tier.Stats()); {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: never reached", tier.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never came", what)
		}
		time.Sleep(time.Millisecond)
	}
}
