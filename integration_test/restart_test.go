package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestServerRestartFirstRead: the Chroma server stops mid-session (reads
// are EIO), then starts again on the same port and data: the FIRST read
// after it is back succeeds, with the right bytes, whether it is the page
// that failed or another one (docs/SEMANTICS.md, "After a failure").
func TestServerRestartFirstRead(t *testing.T) {
	requireFUSE(t)
	for _, prefetch := range []string{"none", "dir"} {
		t.Run("prefetch-"+prefetch, func(t *testing.T) {
			if env.script == "" {
				serverCtl(t, "stop") // skips
			}
			parent := t.TempDir()
			name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Seed: 33})
			mnt := mountDir(t, parent)
			startMount(t, name, mnt, "--prefetch", prefetch, "--timeout", "2s")
			pages := sourcePages(t, src)
			// With prefetch dir a first read would load every page of this
			// small corpus: there, the mount's own tree load is the
			// session's traffic before the outage.
			if prefetch == "none" {
				if _, code := sh(t, mnt, "cat "+pages[0]+" >/dev/null", false); code != 0 {
					t.Fatal("cat before the outage failed")
				}
			}
			serverCtl(t, "stop")
			restarted := false
			t.Cleanup(func() {
				if !restarted {
					serverCtl(t, "start")
				}
			})
			if out, code := sh(t, mnt, "cat "+pages[1], true); code == 0 || !strings.Contains(out, "Input/output error") {
				t.Fatalf("uncached read with the server down: exit %d %q; want EIO", code, out)
			}
			serverCtl(t, "start")
			restarted = true
			for _, rel := range []string{pages[1], pages[2]} {
				start := time.Now()
				got, code := sh(t, mnt, "cat "+rel, true)
				want, _ := sh(t, src, "cat "+rel, false)
				if code != 0 || got != want {
					t.Errorf("first read of %s after the server came back: exit %d, %d bytes (want %d): %.200q", rel, code, len(got), len(want), got)
				}
				fmt.Printf("BENCH first read after a restart (prefetch %s): %s\n", prefetch, time.Since(start))
			}
		})
	}
}

// TestDeadServerGrepFailsFast: grep -r over 1,000 uncached files while
// the server refuses every record get fails fast — every file EIO, about
// one attempt a file, not three — and the first grep once the server
// answers again reads every file.
func TestDeadServerGrepFailsFast(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 1000, Seed: 34})
	p := newFaultProxy(t, env.url)
	mnt := mountDir(t, parent)
	startMountEnv(t, nil, name, mnt, p.URL, "--prefetch", "dir", "--timeout", "1s")
	p.set("refuse")
	before, start := p.gets.Load(), time.Now()
	out, _ := sh(t, mnt, "{ grep -r -c zzzz-nowhere . 2>&1 >/dev/null; true; } | grep -c 'Input/output error'", false)
	took, gets := time.Since(start), p.gets.Load()-before
	p.set("")
	if strings.TrimSpace(out) != "1000" {
		t.Errorf("grep -r on a dead server: %s files reported EIO, want 1000", strings.TrimSpace(out))
	}
	fmt.Printf("BENCH grep -r over 1,000 files on a dead server: %s, %d record gets\n", took, gets)
	if took > 30*time.Second {
		t.Errorf("grep -r over 1,000 files on a dead server took %s; want it to fail fast (< 30s)", took)
	}
	if gets > 1300 {
		t.Errorf("grep -r over 1,000 files on a dead server cost %d record gets; want about one a file", gets)
	}
	start = time.Now()
	sameOutput(t, mnt, src, "grep -r -c the . | sort")
	fmt.Printf("BENCH first grep -r over 1,000 files once the server is back: %s\n", time.Since(start))
}
