package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateRoundTrip(t *testing.T) {
	d := newTestDaemon(t, "")
	if recs, err := d.state.load(); err != nil || len(recs) != 0 {
		t.Fatalf("no state yet: %v %v", recs, err)
	}
	d.mu.Lock()
	d.attachments["abc"] = &attachment{rec: record{ID: "abc", Path: "/p", UID: 5, Collection: "docs", Groups: []string{"x"}, MountID: 9, Below: []uint64{3}}}
	n := d.saveLocked(d.attachments["abc"].rec)
	d.saveLocked(record{ID: "gone", Path: "/q"})
	d.forgetLocked("gone")
	d.unlock()
	d.synced(n)
	recs, err := d.state.load()
	if err != nil || len(recs) != 1 || recs[0].MountID != 9 || recs[0].Below[0] != 3 || recs[0].Groups[0] != "x" {
		t.Fatalf("round trip: %+v %v", recs, err)
	}
	st, err := os.Stat(filepath.Join(d.cfg.StateDir, journalFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v (%v)", st.Mode().Perm(), err)
	}
	d.mu.Lock()
	d.compactLocked()
	d.unlock()
	if _, err := os.Stat(filepath.Join(d.cfg.StateDir, journalFile)); !os.IsNotExist(err) {
		t.Errorf("the journal after a compaction: %v, want none", err)
	}
	if recs, err := d.state.load(); err != nil || len(recs) != 1 || recs[0].ID != "abc" {
		t.Fatalf("after a compaction: %+v %v", recs, err)
	}
	if err := os.WriteFile(filepath.Join(d.cfg.StateDir, stateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(context.Background()); err == nil || !strings.Contains(err.Error(), "kept as") {
		t.Errorf("a damaged state file: %v, want an error and the file kept aside", err)
	}
	if aside, _ := filepath.Glob(filepath.Join(d.cfg.StateDir, stateFile+".damaged-*")); len(aside) != 1 {
		t.Errorf("the damaged file was not kept aside: %v", aside)
	}
	delete(d.attachments, "abc")
}

// TestJournalLines: a last line cut short by a crash is a change not
// made; a bad line before it damages the state; replaying a journal over
// a snapshot that holds its changes already changes nothing (a crash
// between writing the snapshot and removing the journal).
func TestJournalLines(t *testing.T) {
	for _, c := range []struct {
		name, snapshot, journal string
		want                    []string // ids, or nil with bad
		bad                     bool
	}{
		{"journal only", "", `{"put":{"id":"a","path":"/a"}}` + "\n" + `{"put":{"id":"b","path":"/b"}}` + "\n", []string{"a", "b"}, false},
		{"a torn last line", "", `{"put":{"id":"a","path":"/a"}}` + "\n" + `{"put":{"id":"b","pa`, []string{"a"}, false},
		{"a bad line inside", "", `{"put":{"id":"a"}}` + "\nnonsense\n" + `{"del":"a"}` + "\n", nil, true},
		{"neither put nor del", "", `{}` + "\n", nil, true},
		{"del over the snapshot", `{"version":1,"attachments":[{"id":"a"},{"id":"b"}]}`, `{"del":"a"}` + "\n", []string{"b"}, false},
		{"replayed over a snapshot holding it", `{"version":1,"attachments":[{"id":"b","mount_id":2}]}`,
			`{"put":{"id":"a"}}` + "\n" + `{"put":{"id":"b","mount_id":2}}` + "\n" + `{"del":"a"}` + "\n", []string{"b"}, false},
		{"put, del and put again", "", `{"put":{"id":"a"}}` + "\n" + `{"del":"a"}` + "\n" + `{"put":{"id":"a","mount_id":3}}` + "\n", []string{"a"}, false},
		{"a snapshot of another version", `{"version":2,"attachments":[]}`, "", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.snapshot != "" {
				if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(c.snapshot), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, journalFile), []byte(c.journal), 0o600); err != nil {
				t.Fatal(err)
			}
			recs, err := newStateStore(dir).load()
			if c.bad {
				if err == nil {
					t.Fatalf("load: %+v, want an error", recs)
				}
				return
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
			if err != nil || fmt.Sprint(ids) != fmt.Sprint(c.want) {
				t.Fatalf("load: %v %v, want %v", ids, err, c.want)
			}
		})
	}
}

// TestAttachWritesOneLine: with thousands of attachments recorded, an
// attachment's record costs one journal line: the snapshot is not
// written again (the red team's 2,500 attachments made every attach
// rewrite and fsync 1.1 MB under the daemon's lock), and the journal is
// folded into the snapshot once it outgrows the records.
func TestAttachWritesOneLine(t *testing.T) {
	d := newTestDaemon(t, "")
	d.mu.Lock()
	defer d.unlock()
	for i := range 2500 {
		id := fmt.Sprintf("a%04d", i)
		d.attachments[id] = &attachment{rec: record{ID: id, Path: "/run/conv/" + id + "/docs", UID: 65534, Collection: "docs", Groups: []string{"billing"}}}
	}
	d.compactLocked()
	snap := filepath.Join(d.cfg.StateDir, stateFile)
	before, err := os.Stat(snap)
	if err != nil || before.Size() < 300_000 {
		t.Fatalf("snapshot of 2,500 records: %v %v", before, err)
	}
	rec := record{ID: "new", Path: "/run/conv/new/docs", UID: 65534, Collection: "docs"}
	d.saveLocked(rec)
	after, err := os.Stat(snap)
	// the snapshot is written to a new file renamed over the old one: the
	// same file (not just the same time and size: a time's granularity may
	// hide a rewrite, and the records written would be the same) is proof
	if err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("an attach wrote the snapshot again: %v -> %v", before, after)
	}
	j, err := os.Stat(filepath.Join(d.cfg.StateDir, journalFile))
	if err != nil || j.Size() > 400 {
		t.Errorf("an attach's journal line: %v %v, want one line of a few hundred bytes", j, err)
	}
	// detaches and attaches of the same records, past the journal's slack:
	// the snapshot is written again, and the journal starts anew
	for i := range 2*2500 + compactAfter + 1 {
		if i%2 == 0 {
			d.forgetLocked("new")
		} else {
			d.saveLocked(rec)
		}
	}
	if recs, err := d.state.load(); err != nil || len(recs) != 2500 {
		t.Errorf("after a compaction: %d records, %v", len(recs), err)
	}
	if j, err := os.Stat(filepath.Join(d.cfg.StateDir, journalFile)); err == nil && j.Size() > 1<<20 {
		t.Errorf("the journal was not folded into the snapshot: %d bytes", j.Size())
	}
	for id := range d.attachments {
		delete(d.attachments, id)
	}
}

// BenchmarkStateWrite: what recording one attachment costs with 2,500
// recorded, to disk (fsync included): a journal line (what an attach
// does now) against writing every record again (what it did before, and
// what a compaction does).
//
//	go test -run '^$' -bench BenchmarkStateWrite -benchtime 200x ./daemon/
func BenchmarkStateWrite(b *testing.B) {
	d := newTestDaemon(b, "")
	d.mu.Lock()
	for i := range 2500 {
		id := fmt.Sprintf("a%04d", i)
		d.attachments[id] = &attachment{rec: record{ID: id, Path: "/run/conv/" + id + "/docs", UID: 65534, Collection: "docs", Groups: []string{"billing"}}}
	}
	d.compactLocked()
	d.mu.Unlock()
	rec := record{ID: "new", Path: "/run/conv/new/docs", UID: 65534, Collection: "docs"}
	b.Run("journal", func(b *testing.B) {
		for range b.N {
			d.mu.Lock()
			n := d.state.put(rec)
			d.mu.Unlock()
			d.synced(n)
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		for range b.N {
			d.mu.Lock()
			d.compactLocked()
			d.mu.Unlock()
		}
	})
	d.mu.Lock()
	clear(d.attachments)
	d.mu.Unlock()
}

// TestJournalWriteFailure: a change that cannot be written (a full disk)
// leaves no torn line for the next to follow: nothing more is appended
// until a compaction writes every record again, and the state reads
// back whole.
func TestJournalWriteFailure(t *testing.T) {
	d := newTestDaemon(t, "")
	d.mu.Lock()
	defer d.unlock()
	d.attachments["a"] = &attachment{rec: record{ID: "a", Path: "/a"}}
	if n := d.state.put(d.attachments["a"].rec); n == 0 {
		t.Fatal("a first change was not written")
	}
	// the journal's descriptor made unwritable: the next write fails
	good := d.state.journal
	ro, err := os.Open(good.Name())
	if err != nil {
		t.Fatal(err)
	}
	d.state.journal = ro
	good.Close()
	d.attachments["b"] = &attachment{rec: record{ID: "b", Path: "/b"}}
	if n := d.state.put(d.attachments["b"].rec); n != 0 || d.state.sync(n) == nil {
		t.Fatalf("a change that could not be written: %d, and sync says nothing", n)
	}
	if n := d.state.put(record{ID: "c", Path: "/c"}); n != 0 {
		t.Error("a change was appended after a failed one, before a compaction")
	}
	if !d.state.needsCompaction(len(d.attachments)) {
		t.Error("no compaction due after a failure")
	}
	d.compactIfDue()
	recs, err := d.state.load()
	if err != nil || len(recs) != 2 {
		t.Fatalf("after the compaction: %+v %v, want a and b", recs, err)
	}
	if n := d.state.put(record{ID: "c", Path: "/c"}); n == 0 || d.state.sync(n) != nil {
		t.Error("changes are not written again after a compaction")
	}
	if recs, err := d.state.load(); err != nil || len(recs) != 3 {
		t.Errorf("after another change: %+v %v", recs, err)
	}
	clear(d.attachments)
}
