package integration_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

func TestScratchColdMount(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 1000, Seed: 50})
	p, err := harness.StartCloudProxy(env.url, harness.WithRTT(25*time.Millisecond))
	must(t, err)
	t.Cleanup(p.Close)
	for i := 0; i < 3; i++ {
		mnt := mountDir(t, t.TempDir())
		start := time.Now()
		m := startMountEnv(t, nil, name, mnt, p.URL, "--cache-dir", t.TempDir(), "--prefetch", "none", "--debug")
		fmt.Printf("SCRATCH wall %v conns %d\n%s\n", time.Since(start), p.Conns.Load(), m.logs)
		m.stop(t)
	}
}
