package fusefs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/search"
	"github.com/chromafs/chromafs/tree"
)

// fakeSearcher answers every query with the pages it was given, and the
// errors its queries name.
type fakeSearcher struct {
	hits     []search.Hit
	prepared []string
	similar  []string // the paths .similar/ was asked for
}

func (f *fakeSearcher) Prepare(t *tree.Tree) { f.prepared = append(f.prepared, t.Version) }

func (f *fakeSearcher) Search(ctx context.Context, t *tree.Tree, name string) (*search.Results, error) {
	switch name {
	case "bad":
		return nil, fmt.Errorf("x: %w", search.ErrInvalid)
	case "unsupported":
		return nil, fmt.Errorf("x: %w", search.ErrUnsupported)
	case "broken":
		return nil, errors.New("chroma is away")
	case "enoent":
		return nil, fmt.Errorf("a failure wrapping %w", syscall.ENOENT)
	}
	q, err := search.ParseName(name)
	if err != nil {
		return nil, err
	}
	return &search.Results{Query: q, Hits: f.hits}, nil
}

func (f *fakeSearcher) SimilarTo(ctx context.Context, t *tree.Tree, path string, k int) (*search.Results, error) {
	f.similar = append(f.similar, fmt.Sprintf("%s k=%d", path, k))
	return &search.Results{Query: search.Query{Text: path, K: max(k, 10), Mode: search.Similar}, Hits: f.hits}, nil
}

func (f *fakeSearcher) README(ctx context.Context) []byte { return []byte("how to search\n") }

// rawFS is f served through go-fuse's bridge, without a kernel.
type rawFS struct {
	t   *testing.T
	raw fuse.RawFileSystem
}

func newRaw(t *testing.T, f *FS) *rawFS {
	ttl := f.cfg.CacheTTL
	return &rawFS{t, fs.NewNodeFS(f.Root(), &fs.Options{EntryTimeout: &ttl, AttrTimeout: &ttl, RootStableAttr: &fs.StableAttr{Ino: tree.RootIno}})}
}

// lookup walks path from the root; it returns the node id and the status
// of the last step.
func (r *rawFS) lookup(path string) (uint64, fuse.EntryOut, fuse.Status) {
	id := uint64(1)
	var out fuse.EntryOut
	for _, name := range strings.Split(path, "/") {
		out = fuse.EntryOut{}
		st := r.raw.Lookup(nil, &fuse.InHeader{NodeId: id}, name, &out)
		if !st.Ok() {
			return 0, out, st
		}
		id = out.NodeId
	}
	return id, out, fuse.OK
}

func (r *rawFS) mustLookup(path string) (uint64, fuse.EntryOut) {
	r.t.Helper()
	id, out, st := r.lookup(path)
	if !st.Ok() {
		r.t.Fatalf("lookup %s: %v", path, st)
	}
	return id, out
}

func (r *rawFS) readlink(path string) string {
	r.t.Helper()
	id, _ := r.mustLookup(path)
	b, st := r.raw.Readlink(nil, &fuse.InHeader{NodeId: id})
	if !st.Ok() {
		r.t.Fatalf("readlink %s: %v", path, st)
	}
	return string(b)
}

func (r *rawFS) read(path string) string {
	r.t.Helper()
	id, out := r.mustLookup(path)
	var open fuse.OpenOut
	if st := r.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: id}}, &open); !st.Ok() {
		r.t.Fatalf("open %s: %v", path, st)
	}
	buf := make([]byte, out.Attr.Size+10)
	res, st := r.raw.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: id}, Fh: open.Fh, Size: uint32(len(buf))}, buf)
	if !st.Ok() {
		r.t.Fatalf("read %s: %v", path, st)
	}
	b, _ := res.Bytes(buf)
	if uint64(len(b)) != out.Attr.Size {
		r.t.Errorf("%s: read %d bytes, its size says %d", path, len(b), out.Attr.Size)
	}
	return string(b)
}

// names lists the directory at path (its node id) as READDIR gives it.
func (r *rawFS) names(id uint64) []string {
	r.t.Helper()
	var open fuse.OpenOut
	if st := r.raw.OpenDir(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: id}}, &open); !st.Ok() {
		r.t.Fatalf("opendir: %v", st)
	}
	defer r.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: id}, Fh: open.Fh})
	buf := make([]byte, 1<<16)
	list := fuse.NewDirEntryList(buf, 0)
	if st := r.raw.ReadDir(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: id}, Fh: open.Fh, Size: uint32(len(buf))}, list); !st.Ok() {
		r.t.Fatalf("readdir: %v", st)
	}
	return parseDirents(buf) // fuse_dirent: ino, off, namelen, type, name (8-byte aligned); then zeros
}

func parseDirents(b []byte) []string {
	var out []string
	for len(b) >= 24 {
		n := int(uint32(b[16]) | uint32(b[17])<<8 | uint32(b[18])<<16 | uint32(b[19])<<24)
		if n == 0 || 24+n > len(b) {
			break
		}
		out = append(out, string(b[24:24+n]))
		size := (24 + n + 7) &^ 7
		if size > len(b) {
			break
		}
		b = b[size:]
	}
	return out
}

// TestSearchNodes: .search and .similar answer at the root only, are
// never listed, and hold relative links to the pages (one ../ more for
// each level below .similar), .results and .README; a search's errors
// are EINVAL, EOPNOTSUPP and EIO (never ENOENT); without a Searcher the
// names do not exist.
func TestSearchNodes(t *testing.T) {
	tr := build(t, `{"guides/auth/keys":{"isPublic":true,"sha256":"11","size":3,"chunks":[3]},"top":{"isPublic":true,"sha256":"22","size":3,"chunks":[3]}}`)
	hits := []search.Hit{{Path: "guides/auth/keys.mdx", Score: 2, Text: "rotate them"}, {Path: "top.mdx", Score: 1, Text: "top"}}
	fk := &fakeSearcher{hits: hits}
	f := New(tr, nil, Config{NoKernelPush: true, Search: fk})
	defer f.Close()
	if len(fk.prepared) != 1 || fk.prepared[0] != tr.Version {
		t.Errorf("Prepare calls %v, want the tree served", fk.prepared)
	}
	r := newRaw(t, f)

	if names := r.names(1); strings.Contains(strings.Join(names, ","), ".search") || strings.Contains(strings.Join(names, ","), ".similar") {
		t.Errorf("the root lists %v", names)
	}
	if _, _, st := r.lookup("guides/.search"); st != fuse.ENOENT {
		t.Errorf("guides/.search: %v, want ENOENT (the root's only)", st)
	}
	if got := r.read(".search/.README"); got != "how to search\n" {
		t.Errorf(".README: %q", got)
	}
	id, out := r.mustLookup(".search/rotate keys?k=5")
	if out.Attr.Mode&syscall.S_IFMT != syscall.S_IFDIR || out.Attr.Ino&(1<<63) == 0 {
		t.Errorf("a result directory: mode %o ino %x", out.Attr.Mode, out.Attr.Ino)
	}
	if got, want := strings.Join(r.names(id), ","), ".,..,.results,01-keys.mdx,02-top.mdx"; got != want {
		t.Errorf("listing %s, want %s", got, want)
	}
	if got := r.readlink(".search/rotate keys?k=5/01-keys.mdx"); got != "../../guides/auth/keys.mdx" {
		t.Errorf("link %q", got)
	}
	if got := r.read(".search/rotate keys?k=5/.results"); !strings.Contains(got, "1\t2\tguides/auth/keys.mdx\n\tguides/auth/keys.mdx: rotate them\n") {
		t.Errorf(".results:\n%s", got)
	}
	if _, _, st := r.lookup(".search/rotate keys?k=5/03-nothing"); st != fuse.ENOENT {
		t.Errorf("a name the results do not hold: %v", st)
	}
	if got := r.readlink(".similar/guides/auth/keys.mdx/02-top.mdx"); got != "../../../../top.mdx" {
		t.Errorf(".similar link %q", got)
	}
	r.mustLookup(".similar/top.mdx?k=3")
	if got := strings.Join(fk.similar, ";"); got != "guides/auth/keys.mdx k=0;top.mdx k=3" {
		t.Errorf("SimilarTo asked for %s", got)
	}
	for name, want := range map[string]fuse.Status{
		".search/bad": fuse.EINVAL, ".search/unsupported": fuse.Status(syscall.EOPNOTSUPP),
		".search/broken": fuse.EIO, ".search/enoent": fuse.EIO, ".similar/nope.mdx": fuse.ENOENT,
		".similar/guides/auth/keys.mdx?k=0": fuse.EINVAL,
	} {
		if _, _, st := r.lookup(name); st != want {
			t.Errorf("%s: %v, want %v", name, st, want)
		}
	}

	off := New(tr, nil, Config{NoKernelPush: true})
	defer off.Close()
	if _, _, st := newRaw(t, off).lookup(".search"); st != fuse.ENOENT {
		t.Errorf("without a Searcher .search is %v, want ENOENT", st)
	}
}
