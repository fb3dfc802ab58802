package hostcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromafs/chromafs/cache"
)

func page(n int, seed byte) ([]byte, cache.PageKey) {
	data := bytes.Repeat([]byte{'a' + seed%26, '\n', seed}, n/3+1)[:n]
	sum := sha256.Sum256(data)
	return data, cache.PageKey{Collection: "default_tenant/default_database/0123", SHA256: hex.EncodeToString(sum[:])}
}

func open(t *testing.T, dir string, max int64) *Cache {
	t.Helper()
	c, err := Open(dir, max, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestRoundTripAndSharing(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, 1<<20), open(t, dir, 1<<20) // two processes of one host
	data, k := page(5000, 1)
	if _, ok := a.Get(k, int64(len(data))); ok {
		t.Fatal("hit in an empty cache")
	}
	a.Put(k, data)
	got, ok := b.Get(k, int64(len(data)))
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("other instance: ok=%v, %d bytes", ok, len(got))
	}
	other := k
	other.Collection = "another/collection/id"
	if _, ok := b.Get(other, int64(len(data))); ok {
		t.Error("an entry of another collection was served")
	}
	st, err := os.Stat(a.path(k))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("entry %v (%v), want mode 0600", st, err)
	}
	if _, ok := b.Get(k, int64(len(data))+1); ok {
		t.Error("an entry was served for another size")
	}
	if st, _ := os.Stat(a.Dir()); st.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode %v, want 0700", st.Mode())
	}
}

// TestGetsShareNoBytes: Get reads entries into buffers it reuses, so a
// page it returned must not change when later reads reuse them.
func TestGetsShareNoBytes(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	var pages [][]byte
	var keys []cache.PageKey
	for i := range 8 {
		data, k := page(3000+i*500, byte(i))
		c.Put(k, data)
		pages, keys = append(pages, data), append(keys, k)
	}
	var got [][]byte
	for i, k := range keys {
		b, ok := c.Get(k, int64(len(pages[i])))
		if !ok {
			t.Fatalf("page %d: a miss", i)
		}
		got = append(got, b)
	}
	for i := range keys { // read again: the buffers go round
		c.Get(keys[i], int64(len(pages[i])))
	}
	for i := range got {
		if !bytes.Equal(got[i], pages[i]) {
			t.Errorf("page %d changed after later reads", i)
		}
	}
	// a hit allocates its page and what opening a file takes, not the
	// entry it read (as large as the page: random bytes do not compress)
	data := make([]byte, 8000)
	rand.NewChaCha8([32]byte{1}).Read(data)
	sum := sha256.Sum256(data)
	k := cache.PageKey{Collection: "c", SHA256: hex.EncodeToString(sum[:])}
	c.Put(k, data)
	c.Get(k, int64(len(data)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 50
	for range n {
		if _, ok := c.Get(k, int64(len(data))); !ok {
			t.Fatal("a miss")
		}
	}
	runtime.ReadMemStats(&after)
	if per := int64(after.TotalAlloc-before.TotalAlloc) / n; per > int64(len(data))+2048 && !raceEnabled {
		t.Errorf("a hit of %d bytes allocates %d bytes", len(data), per)
	}
}

// TestDecodeChecksEveryHeaderField: an entry decodes only for the key
// and size it was made for, and only its page is allocated.
func TestDecodeChecksEveryHeaderField(t *testing.T) {
	data, k := page(5000, 4)
	entry, ok := Encode(k, data)
	if !ok {
		t.Fatal("Encode refused the page")
	}
	if got, err := Decode(entry, k, int64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Decode: %d bytes, %v", len(got), err)
	}
	part := k
	part.Part = "0-1"
	partEntry, _ := Encode(part, data)
	for name, c := range map[string]struct {
		raw  []byte
		k    cache.PageKey
		size int64
	}{
		"other collection":            {entry, cache.PageKey{Collection: k.Collection + "x", SHA256: k.SHA256}, int64(len(data))},
		"a prefix of the collection":  {entry, cache.PageKey{Collection: k.Collection[:5], SHA256: k.SHA256}, int64(len(data))},
		"other sha256":                {entry, cache.PageKey{Collection: k.Collection, SHA256: strings.Repeat("0", 64)}, int64(len(data))},
		"a part's entry":              {partEntry, k, int64(len(data))},
		"the page's entry for a part": {entry, part, int64(len(data))},
		"other size":                  {entry, k, int64(len(data)) + 1},
		"a size's prefix":             {entry, k, int64(len(data)) / 10},
		"empty":                       {nil, k, int64(len(data))},
		"header only":                 {entry[:len(header(k, int64(len(data))))], k, int64(len(data))},
	} {
		if got, err := Decode(c.raw, c.k, c.size); err == nil {
			t.Errorf("%s: decoded %d bytes", name, len(got))
		}
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = Decode(entry, k, int64(len(data))) }); n > 1 && !raceEnabled {
		t.Errorf("Decode allocates %.0f times, want only the page", n)
	}
}

// TestCorruptEntriesAreMisses: whatever happened to an entry on disk, Get
// never serves a wrong byte: the entry is a miss and is removed.
func TestCorruptEntriesAreMisses(t *testing.T) {
	data, k := page(20000, 2)
	damage := map[string]func(p string, raw []byte){
		"truncated": func(p string, raw []byte) { os.WriteFile(p, raw[:len(raw)-7], 0o600) },
		"bit flip":  func(p string, raw []byte) { raw[len(raw)-3] ^= 0x10; os.WriteFile(p, raw, 0o600) },
		"empty":     func(p string, raw []byte) { os.WriteFile(p, nil, 0o600) },
		"header":    func(p string, raw []byte) { raw[3] = 'X'; os.WriteFile(p, raw, 0o600) },
		"other page": func(p string, raw []byte) {
			d, k2 := page(20000, 3)
			os.WriteFile(p, append(header(k, 20000), zstdOf(t, d, k2)...), 0o600)
		},
		"chmod 000": func(p string, raw []byte) { os.Chmod(p, 0) },
		"deleted":   func(p string, raw []byte) { os.Remove(p) },
	}
	for name, hurt := range damage {
		t.Run(name, func(t *testing.T) {
			c := open(t, t.TempDir(), 1<<20)
			c.Put(k, data)
			raw, err := os.ReadFile(c.path(k))
			if err != nil {
				t.Fatal(err)
			}
			hurt(c.path(k), raw)
			got, ok := c.Get(k, int64(len(data)))
			if ok && !bytes.Equal(got, data) {
				t.Fatal("a damaged entry served wrong bytes")
			}
			if ok && name != "chmod 000" { // root reads a 000 file; it is intact
				t.Fatal("a damaged entry was served")
			}
			c.Put(k, data) // the next fetch repairs it
			if got, ok := c.Get(k, int64(len(data))); !ok || !bytes.Equal(got, data) {
				t.Errorf("entry not repaired by the next Put (ok=%v)", ok)
			}
		})
	}
}

func zstdOf(t *testing.T, data []byte, _ cache.PageKey) []byte {
	t.Helper()
	enc, _ := codec()
	return enc.EncodeAll(data, nil)
}

// TestParts: a part of a page is verified against the digest written with
// it, so a damaged part is a miss too.
func TestParts(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	_, k := page(10, 6)
	k.Part = "4-8"
	part := []byte("chunks four to eight")
	c.Put(k, part)
	if got, ok := c.Get(k, int64(len(part))); !ok || string(got) != string(part) {
		t.Fatalf("part round trip: ok=%v %q", ok, got)
	}
	whole := k
	whole.Part = ""
	if _, ok := c.Get(whole, int64(len(part))); ok {
		t.Error("a part was served as the whole page")
	}
	raw, _ := os.ReadFile(c.path(k))
	raw[len(raw)-1] ^= 1
	os.WriteFile(c.path(k), raw, 0o600)
	if _, ok := c.Get(k, int64(len(part))); ok {
		t.Error("a damaged part was served")
	}
}

func TestPutRefusesWrongDigest(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	data, k := page(100, 4)
	c.Put(k, append(data[:99:99], 'X'))
	if _, err := os.Stat(c.path(k)); err == nil {
		t.Error("a page whose digest does not match its key was stored")
	}
}

func TestEvictionKeepsTheBound(t *testing.T) {
	const bound = 64 << 10
	c := open(t, t.TempDir(), bound)
	var keys []cache.PageKey
	for i := 0; i < 40; i++ {
		data, k := page(8000+i, byte(i)) // ~8 KB each, barely compressible
		data = randomish(data, i)
		sum := sha256.Sum256(data)
		k.SHA256 = hex.EncodeToString(sum[:])
		c.Put(k, data)
		old := time.Now().Add(-time.Duration(40-i) * time.Hour)
		os.Chtimes(c.path(k), old, old)
		keys = append(keys, k)
	}
	c.Evict()
	_, total := c.scan()
	if total > bound {
		t.Errorf("%d bytes on disk after eviction, bound %d", total, bound)
	}
	if _, err := os.Stat(c.path(keys[39])); err != nil {
		t.Error("the newest entry was evicted")
	}
	if _, err := os.Stat(c.path(keys[0])); err == nil {
		t.Error("the oldest entry survived eviction")
	}
	if c.Stats().Evictions == 0 {
		t.Error("evictions not counted")
	}
}

func randomish(b []byte, seed int) []byte {
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestLockIsExclusiveAcrossInstances(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, 1<<20), open(t, dir, 1<<20)
	_, k := page(10, 5)
	unlock, ok := a.TryLock(k)
	if !ok {
		t.Fatal("first TryLock failed")
	}
	if _, ok := b.TryLock(k); ok {
		t.Fatal("second instance took a held lock")
	}
	start := time.Now()
	if _, ok := b.Lock(context.Background(), k, 100*time.Millisecond); ok || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("Lock of a held lock: ok=%v after %s; want a timeout", ok, time.Since(start))
	}
	go func() { time.Sleep(50 * time.Millisecond); unlock() }()
	unlock2, ok := b.Lock(context.Background(), k, 5*time.Second)
	if !ok {
		t.Fatal("Lock did not get the lock once released")
	}
	unlock2()
}

func TestOpenRefusesSharedDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, FormatDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, FormatDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, 1<<20, nil); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("Open of a 0755 dir: %v", err)
	}
}

func TestStaleTempFilesRemoved(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	tmp := filepath.Join(c.dir, "tmp", "put-killed")
	os.WriteFile(tmp, []byte("half an entry"), 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(tmp, old, old)
	c.Evict()
	if _, err := os.Stat(tmp); err == nil {
		t.Error("an old temporary file survived the scan")
	}
	entries, _ := c.scan()
	if len(entries) != 0 {
		t.Errorf("scan counts %d entries, want 0: %v", len(entries), fmt.Sprint(entries))
	}
}

// TestBudgetBoundsConcurrencyAcrossInstances: two budgets on one directory
// (two mount processes) never hold more than n slots between them.
func TestBudgetBoundsConcurrencyAcrossInstances(t *testing.T) {
	dir := t.TempDir()
	var budgets []*Budget
	for range 2 {
		b, err := OpenBudget(dir, "http://chroma/db/docs", 3)
		if err != nil {
			t.Fatal(err)
		}
		budgets = append(budgets, b)
	}
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := budgets[i%2].Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			n := inFlight.Add(1)
			for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			inFlight.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p == 0 {
		t.Errorf("peak %d slots held at once, bound 3", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var held []func()
	for range 3 {
		r, _ := budgets[0].Acquire(ctx)
		held = append(held, r)
	}
	if _, err := budgets[1].Acquire(ctx); err == nil {
		t.Error("a fourth slot was granted with 3 held")
	}
	for _, r := range held {
		r()
	}
}

// TestRefs: a ref survives a new Cache on the same directory, is replaced
// by SetRef, refuses values that are not one line of at most 256 bytes,
// and is neither an entry nor counted by eviction.
func TestRefs(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Ref("coll"); ok {
		t.Fatal("a ref never set was found")
	}
	c.SetRef("coll", "id-1")
	c.SetRef("coll", "id-2")
	c.SetRef("coll", "bad\nvalue")
	c.SetRef("coll", strings.Repeat("x", 300))
	c2, err := Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c2.Ref("coll"); !ok || v != "id-2" {
		t.Errorf("Ref = %q, %v; want id-2", v, ok)
	}
	if entries, total := c2.scan(); len(entries) != 0 || total != 0 {
		t.Errorf("refs counted as %d entries of %d bytes", len(entries), total)
	}
	st, err := os.Stat(c2.refPath("coll"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ref file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
}

// TestLargeEntries: a big tree's text or snapshot (over MaxPage) is kept
// and served whole; a bit flipped in it is a miss.
func TestLargeEntries(t *testing.T) {
	c := open(t, t.TempDir(), 1<<30)
	data, k := page(MaxPage+3<<20, 7)
	c.Put(k, data)
	got, ok := c.Get(k, int64(len(data)))
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("a %d-byte entry: ok=%v, %d bytes back", len(data), ok, len(got))
	}
	raw, err := os.ReadFile(c.path(k))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-10] ^= 1
	if err := os.WriteFile(c.path(k), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(k, int64(len(data))); ok {
		t.Error("a damaged large entry was served")
	}
}

// TestLocksCreateNoFiles: the locks of many pages are bytes of one file,
// not files of their own (a create per page was most of a cold batch's
// time on a slow disk); two loads of one instance exclude each other too.
func TestLocksCreateNoFiles(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<20)
	var unlocks []cache.Unlock
	for i := range 100 {
		_, k := page(i, 5)
		unlock, ok := c.TryLock(k)
		if !ok {
			t.Fatalf("TryLock of page %d failed", i)
		}
		unlocks = append(unlocks, unlock)
	}
	_, k := page(7, 5)
	if _, ok := c.TryLock(k); ok {
		t.Fatal("a second load of the same instance took a held lock")
	}
	for _, u := range unlocks {
		u()
	}
	if _, ok := c.TryLock(k); !ok {
		t.Fatal("a released lock could not be taken again")
	}
	entries, err := os.ReadDir(filepath.Join(dir, FormatDir, "locks"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("locks/ holds %d files (%v), want none", len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(dir, FormatDir, pageLocksFile)); err != nil {
		t.Fatalf("the page-locks file: %v", err)
	}
}

// AppendEntry appends Encode's entry to what dst holds, in one growth at
// most; the entry decodes to the page.
func TestAppendEntry(t *testing.T) {
	data, k := page(6000, 7)
	want, ok := Encode(k, data)
	if !ok {
		t.Fatal("Encode refused a page matching its digest")
	}
	got, ok := AppendEntry([]byte("prefix"), k, data)
	if !ok || string(got) != "prefix"+string(want) {
		t.Fatalf("AppendEntry: %v, %q..., want the prefix and Encode's entry", ok, got[:min(len(got), 20)])
	}
	back, err := Decode(got[len("prefix"):], k, int64(len(data)))
	if err != nil || string(back) != string(data) {
		t.Fatalf("the entry decodes to %d bytes, %v", len(back), err)
	}
	buf := make([]byte, 0, 64<<10)
	if n := testing.AllocsPerRun(20, func() { _, _ = AppendEntry(buf[:0], k, data) }); n > 4 {
		t.Errorf("AppendEntry into a buffer big enough: %.0f allocations, want at most 4 (the header, the digest)", n)
	}
}
