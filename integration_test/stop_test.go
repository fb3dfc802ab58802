package integration_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// TestMountStopJudgesTheExit: a mount's end is judged after the process
// has exited — a clean SIGTERM is exit 0 and passes; a death by signal (as
// a race detector's exit 66 would) is reported unless the test expects
// it; a DATA RACE report in the log fails whatever the exit.
func TestMountStopJudgesTheExit(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 5, Seed: 71})
	mnt := mountDir(t, parent)

	m := startMountBin(t, env.raceBin, name, mnt, env.url)
	if err := m.Stop(15 * time.Second); err != nil {
		t.Errorf("SIGTERM: exit %v, want 0:\n%s", err, m.logs)
	}
	if p := exitProblems(m.Err(), m.logs.String(), nil); len(p) != 0 {
		t.Errorf("a clean exit judged as %q", p)
	}

	m = startMountBin(t, env.raceBin, name, mnt, env.url)
	m.expectExit(-1) // for the cleanup's stop: the test kills it
	must(t, m.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-m.Done():
	case <-time.After(15 * time.Second):
		_ = harness.Abort(mnt) // so that the process can exit, and the run goes on
		t.Fatal("no exit 15s after SIGKILL")
	}
	if p := exitProblems(m.Err(), m.logs.String(), nil); len(p) != 1 || !strings.Contains(p[0], "code -1") {
		t.Errorf("a death by SIGKILL judged as %q, want one problem naming code -1", p)
	}
	if p := exitProblems(m.Err(), m.logs.String(), m.wantExit); len(p) != 0 {
		t.Errorf("a death the test expects judged as %q", p)
	}
	if p := exitProblems(nil, m.logs.String()+"==================\nWARNING: DATA RACE\n", nil); len(p) != 1 || !strings.Contains(p[0], "race detector") {
		t.Errorf("a DATA RACE report after a clean exit judged as %q, want one problem", p)
	}
	m.stop(t) // detaches the killed mount; nothing more to report
	if isMounted(mnt) {
		t.Error("the killed mount is still attached after stop")
	}
}
