package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// The attachments survive the daemon in two files of the state
// directory: attachments.json, a snapshot of every record, and
// attachments.journal, one JSON line per change since the snapshot
// ({"put": record} or {"del": id}). An attach or a detach appends one
// line (a write(2) made under d.mu, so that the lines are in the order
// the changes were made) and waits, after d.mu is released, for an
// fsync that covers it (one fsync for every change made meanwhile): its
// cost does not grow with the attachments the daemon holds, and no
// fsync is waited for under d.mu. When the journal holds many more lines
// than there are records, the snapshot is written again and the journal
// emptied.
//
// Replaying the whole journal over a snapshot gives the same records
// whether or not the snapshot already holds its changes (a put is the
// record, a del its absence), so a crash between writing the snapshot
// and emptying the journal loses nothing. A last line cut short by a
// crash is its own change not made; any other line that cannot be read
// damages the state (see Restore).

// Files of the state directory.
const (
	stateFile   = "attachments.json"
	journalFile = "attachments.journal"
)

type stateDoc struct {
	Version     int      `json:"version"`
	Attachments []record `json:"attachments"`
}

// change is one journal line.
type change struct {
	Put *record `json:"put,omitempty"`
	Del string  `json:"del,omitempty"`
}

// compactAfter is how many journal lines beyond the records held make
// the snapshot be written again.
const compactAfter = 1024

// stateStore keeps the records in the state directory.
type stateStore struct {
	dir string

	mu      sync.Mutex // protects the following
	journal *os.File   // nil until opened
	size    int64      // bytes of whole lines in the journal
	lines   int        // lines in the journal
	written uint64     // changes written to the journal
	// failed is the last failure to write or sync the journal since the
	// last compaction (which is then due: it writes every record again);
	// while it is set, no change is appended (a line after a torn one
	// would make the journal unreadable).
	failed error

	syncMu sync.Mutex // one fsync at a time; protects synced
	synced uint64     // changes known to be on disk
}

func newStateStore(dir string) *stateStore { return &stateStore{dir: dir} }

func (s *stateStore) path(name string) string { return filepath.Join(s.dir, name) }

// load reads the snapshot and replays the journal over it.
func (s *stateStore) load() ([]record, error) {
	var doc stateDoc
	data, err := os.ReadFile(s.path(stateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", stateFile, err)
		}
		if doc.Version != 1 {
			return nil, fmt.Errorf("%s: version %d, want 1", stateFile, doc.Version)
		}
	}
	byID := make(map[string]record, len(doc.Attachments))
	order := make([]string, 0, len(doc.Attachments))
	put := func(r record) {
		if _, ok := byID[r.ID]; !ok {
			order = append(order, r.ID)
		}
		byID[r.ID] = r
	}
	for _, r := range doc.Attachments {
		put(r)
	}
	data, err = os.ReadFile(s.path(journalFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		data = rest
		var c change
		err := json.Unmarshal(line, &c)
		switch {
		case !complete:
			// the last line, cut short by a crash: that change was never made
			// (a whole line is always written with its newline)
		case err != nil || (c.Put == nil) == (c.Del == ""):
			return nil, fmt.Errorf("%s: line %d: not a change", journalFile, n)
		case c.Put != nil:
			put(*c.Put)
		default:
			delete(byID, c.Del)
		}
	}
	out := make([]record, 0, len(byID))
	seen := make(map[string]bool, len(byID))
	for _, id := range order { // an id put, deleted and put again is listed twice
		if r, ok := byID[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// put records r (new or changed) and returns the change's number for
// sync. The caller holds d.mu: the journal's order is the changes'.
func (s *stateStore) put(r record) uint64 { return s.append(change{Put: &r}) }

// del records that the attachment id is gone.
func (s *stateStore) del(id string) uint64 { return s.append(change{Del: id}) }

func (s *stateStore) append(c change) uint64 {
	line, err := json.Marshal(c)
	if err != nil {
		return 0
	}
	line = append(line, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return 0 // until a compaction writes every record again
	}
	if s.journal == nil {
		f, err := os.OpenFile(s.path(journalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			err = syncDir(s.dir) // the new file's name, durable before any line in it counts
		}
		if err != nil {
			if f != nil {
				_ = f.Close()
			}
			s.failed = err
			return 0
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			s.failed = err
			return 0
		}
		s.journal, s.size = f, st.Size()
	}
	if _, err := s.journal.Write(line); err != nil {
		// a torn line would make every line after it unreadable: cut it
		// off, and append nothing more until a compaction succeeds
		_ = s.journal.Truncate(s.size)
		s.failed = err
		return 0
	}
	s.size += int64(len(line))
	s.lines++
	s.written++
	return s.written
}

// sync returns once change n (and every one before it) is on disk: one
// fsync covers every change written before it started. It is called
// without d.mu. n 0 is a change that could not be written: it returns
// the failure. A failed fsync is remembered (Linux may report the next
// one as a success though the pages were lost) until a compaction.
func (s *stateStore) sync(n uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	f, upto, failed := s.journal, s.written, s.failed
	s.mu.Unlock()
	if failed != nil {
		return failed
	}
	if n != 0 && n <= s.synced {
		return nil
	}
	if f == nil {
		return nil
	}
	if err := f.Sync(); err != nil {
		s.mu.Lock()
		s.failed = err
		s.mu.Unlock()
		return err
	}
	s.synced = upto
	return nil
}

// needsCompaction reports whether the journal has grown well past the
// records (live) it describes.
func (s *stateStore) needsCompaction(live int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines > 2*live+compactAfter || s.failed != nil
}

// compact writes recs as the snapshot (atomically: a crash leaves the
// old one or the new one) and empties the journal. The caller holds
// d.mu, so that no change is appended meanwhile.
func (s *stateStore) compact(recs []record) error {
	doc := stateDoc{Version: 1, Attachments: recs}
	if doc.Attachments == nil {
		doc.Attachments = []record{}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(s.path(stateFile), append(data, '\n')); err != nil {
		return err
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal != nil {
		_ = s.journal.Close()
		s.journal = nil
	}
	// every change is in the snapshot now: the journal starts again
	if err := os.Remove(s.path(journalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.size, s.lines, s.failed, s.synced = 0, 0, nil, s.written
	return nil
}

// close closes the journal.
func (s *stateStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal != nil {
		_ = s.journal.Close()
		s.journal = nil
	}
}

// writeFileSync writes data to path through a temporary file, synced
// and renamed over it, then syncs the directory.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename or a removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
