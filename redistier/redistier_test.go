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

	"github.com/chromafs/chromafs/cache"
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

// TestDeadRedisCostsLittle: with nothing listening, a Get fails within the
// deadline, and the tier then rests: the next Gets return at once.
func TestDeadRedisCostsLittle(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	tier, err := Open(Config{URL: "redis://" + addr + "/0", Timeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	k := cache.PageKey{Collection: "c", SHA256: strings.Repeat("a", 64)}
	start := time.Now()
	if _, ok := tier.Get(context.Background(), k, 10); ok {
		t.Fatal("a dead Redis served an entry")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a failed Get took %s", d)
	}
	start = time.Now()
	for range 100 {
		tier.Get(context.Background(), k, 10)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("100 Gets while resting took %s", d)
	}
	if st := tier.Stats(); st.Errors != 1 || st.Skipped < 100 {
		t.Errorf("stats %+v: want 1 error and the rest skipped", st)
	}
	tier.Put(k, []byte("0123456789")) // queued for the writer: never blocks
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
			time.Sleep(200 * time.Millisecond)
			return "$-1\r\n"
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
// second; the next queued entry is sent after it, not dropped.
func TestWriterWaitsOutItsRest(t *testing.T) {
	f := startFake(t, failFirstSet())
	tier, err := Open(Config{URL: f.url()})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	start := time.Now()
	tier.Put(pageKey('a'), []byte("first"))
	tier.Put(pageKey('b'), []byte("second"))
	select {
	case <-f.sets:
	case <-time.After(5 * time.Second):
		t.Fatalf("the write after a failed one never came: %+v", tier.Stats())
	}
	if d := time.Since(start); d < rest/2 {
		t.Errorf("the next write came %s after a failure; want the writer to rest first", d)
	}
	tier.Close()
	if st := tier.Stats(); st.Writes != 1 || st.Errors != 1 {
		t.Errorf("stats %+v: want 1 failed write and 1 written", st)
	}
}

// TestCloseIsBounded: a Redis that never answers a write holds Close no
// longer than the drain's bound, and what is left is dropped.
func TestCloseIsBounded(t *testing.T) {
	f := startFake(t, func(args []string) string { return "" })
	tier, err := Open(Config{URL: f.url(), WriteTimeout: time.Second, DrainTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []byte("abcdefgh") {
		tier.Put(pageKey(c), []byte("entry"))
	}
	start := time.Now()
	tier.Close()
	// the first write may have started before Close: it has its second
	if d := time.Since(start); d > time.Second+time.Second/2 {
		t.Errorf("Close took %s with a drain bound of 200ms and writes of 1s", d)
	}
	if st := tier.Stats(); st.Writes != 0 || st.Skipped+st.Errors != 8 {
		t.Errorf("stats %+v: want the 8 entries skipped (or one failed)", st)
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
	f := startFake(t, func(args []string) string {
		if strings.EqualFold(args[0], "GET") {
			time.Sleep(100 * time.Millisecond)
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
