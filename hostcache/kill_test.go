package hostcache

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/cache"
)

// TestHelperWriter is not a test: run by TestSIGKILLedWriters as a child
// process, it writes one entry over and over until killed.
func TestHelperWriter(t *testing.T) {
	dir := os.Getenv("HOSTCACHE_WRITER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	c, err := Open(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, k := bigPage()
	for {
		c.Put(k, data)
	}
}

func bigPage() ([]byte, cache.PageKey) {
	data, k := page(3<<20, 9)
	data = randomish(data, 9) // incompressible: a write takes a while
	sum := hexDigest(data)
	k.SHA256 = string(sum[:])
	return data, k
}

// TestSIGKILLedWriters: two processes write the same entry and are killed
// with SIGKILL once a write has begun (its temporary file is there), again
// and again until five kills have landed in the middle of a write (a
// temporary file left behind); the entry is never seen partial or wrong,
// only whole or absent, and a verify pass finds nothing bad.
func TestSIGKILLedWriters(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<30)
	data, k := bigPage()
	kill := func(procs []*exec.Cmd) {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGKILL)
			_ = p.Wait()
		}
	}
	writers := func() []*exec.Cmd {
		var procs []*exec.Cmd
		for range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
			cmd.Env = append(os.Environ(), "HOSTCACHE_WRITER_DIR="+dir)
			if err := cmd.Start(); err != nil {
				kill(procs)
				t.Fatal(err)
			}
			procs = append(procs, cmd)
		}
		// they write for ever: a failure before the kill must not leave them
		t.Cleanup(func() { kill(procs) })
		return procs
	}
	tmp := filepath.Join(c.dir, "tmp")
	// a write has begun: its temporary file is there (or, were writes not
	// atomic, the entry itself)
	begun := func() bool {
		if _, err := os.Stat(c.path(k)); err == nil {
			return true
		}
		names, _ := os.ReadDir(tmp)
		return len(names) > 0
	}
	midWrite, round := 0, 0
	for ; midWrite < 5; round++ {
		if round == 200 {
			t.Fatalf("%d rounds killed writers, %d of them in the middle of a write: want 5", round, midWrite)
		}
		_ = os.Remove(c.path(k))
		procs := writers()
		poll(t, "a writer's first write", begun)
		kill(procs)
		if got, ok := c.Get(k, int64(len(data))); ok && !bytes.Equal(got, data) {
			t.Fatalf("round %d: a wrong entry was served", round)
		}
		// a kill in the middle of a write leaves what it was writing: a
		// temporary file (or, were writes not atomic, a damaged entry)
		left, _ := os.ReadDir(tmp)
		if len(left) > 0 || c.Stats().Corrupt > 0 {
			midWrite++
		}
		for _, e := range left {
			_ = os.Remove(filepath.Join(tmp, e.Name()))
		}
	}
	t.Logf("%d rounds of kills, %d in the middle of a write", round, midWrite)
	procs := writers() // then let them finish a write, to show they write at all
	poll(t, "a writer's whole entry", func() bool { _, err := os.Stat(c.path(k)); return err == nil })
	kill(procs)
	if _, ok := c.Get(k, int64(len(data))); !ok {
		t.Fatal("the writers never finished a write: the test proves nothing")
	}
	if good, removed := c.Verify(); removed != 0 || good != 1 {
		t.Errorf("verify after the kills: %d good, %d bad; want the one entry, whole", good, removed)
	}
	if n := c.Stats().Corrupt; n != 0 {
		t.Errorf("%d entries seen damaged: a killed writer left a partial entry under a real name", n)
	}
}

// poll waits until cond holds, failing the test after 20 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never came", what)
		}
	}
}
