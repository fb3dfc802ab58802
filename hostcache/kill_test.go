package hostcache

import (
	"bytes"
	"os"
	"os/exec"
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
	k.SHA256 = digest(data)
	return data, k
}

// TestSIGKILLedWriters: two processes write the same entry and are killed
// with SIGKILL at arbitrary moments, again and again; the entry is never
// seen partial or wrong, only whole or absent, and a verify pass finds
// nothing bad.
func TestSIGKILLedWriters(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<30)
	data, k := bigPage()
	writers := func() []*exec.Cmd {
		var procs []*exec.Cmd
		for range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
			cmd.Env = append(os.Environ(), "HOSTCACHE_WRITER_DIR="+dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, cmd)
		}
		return procs
	}
	kill := func(procs []*exec.Cmd) {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGKILL)
			_ = p.Wait()
		}
	}
	for round := range 12 {
		_ = os.Remove(c.path(k))
		procs := writers()
		time.Sleep(time.Duration(30+round*40) * time.Millisecond)
		kill(procs)
		if got, ok := c.Get(k, int64(len(data))); ok && !bytes.Equal(got, data) {
			t.Fatalf("round %d: a wrong entry was served", round)
		}
	}
	procs := writers() // then let them finish a write, to show they write at all
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(c.path(k)); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
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
