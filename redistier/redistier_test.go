package redistier

import (
	"context"
	"net"
	"strings"
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
	tier.Put(k, []byte("0123456789")) // skipped while resting, never blocks
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
