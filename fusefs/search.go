package fusefs

import (
	"context"
	"errors"
	"hash/maphash"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/search"
	"github.com/chromafs/chromafs/tree"
)

// Searcher answers the unlisted .search/ and .similar/ directories at the
// root (search.Searcher).
type Searcher interface {
	// Prepare is told of each tree the mount serves.
	Prepare(t *tree.Tree)
	Search(ctx context.Context, t *tree.Tree, name string) (*search.Results, error)
	SimilarTo(ctx context.Context, t *tree.Tree, path string, k int) (*search.Results, error)
	README(ctx context.Context) []byte
}

// The unlisted names at the root, and the .README in .search/.
const (
	searchName  = ".search"
	similarName = ".similar"
	readmeName  = ".README"
	resultsName = ".results"
)

// searchRoot answers a lookup at the root of a name the tree does not
// have: .search or .similar, when searching is on. They are never listed
// (like ZFS's .zfs with snapdir=hidden), so that ls -a, find, du and tar
// of the mount see exactly the docs.
func (d *dirNode) searchRoot(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, bool) {
	if d.fsys.cfg.Search == nil || d.node().Ino != tree.RootIno || (name != searchName && name != similarName) {
		return nil, false
	}
	t := d.fsys.tree.Load()
	n := &searchDir{fsys: d.fsys, similar: name == similarName, depth: 1}
	return d.fsys.searchInode(ctx, &d.Inode, n, "dir\x00"+name, t, out), true
}

// searchDir is .search/, .similar/, or a directory of the tree below
// .similar/ (prefix is its path).
type searchDir struct {
	fs.Inode
	readOnly
	fsys    *FS
	similar bool
	prefix  string
	depth   int // components from the root: 1 for .search itself
}

var (
	_ = (fs.NodeLookuper)((*searchDir)(nil))
	_ = (fs.NodeReaddirer)((*searchDir)(nil))
	_ = (fs.NodeGetattrer)((*searchDir)(nil))
)

func (s *searchDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	s.fsys.searchAttr(syscall.S_IFDIR|0o555, 0, &out.Attr)
	return 0
}

// Readdir lists nothing but . and ..: what is here is found by name.
func (s *searchDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return fs.NewListDirStream(dots(&s.Inode)), 0
}

// dots are the . and .. entries of a listing.
func dots(in *fs.Inode) []fuse.DirEntry {
	out := []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR, Ino: in.StableAttr().Ino}}
	if _, parent := in.Parent(); parent != nil {
		out = append(out, fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: parent.StableAttr().Ino})
	}
	return out
}

func (s *searchDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	s.fsys.busy()
	t := s.fsys.tree.Load()
	if !s.similar {
		if name == readmeName {
			f := &memFile{data: s.fsys.cfg.Search.README(ctx)}
			return s.fsys.searchInode(ctx, &s.Inode, f, "readme", t, out), 0
		}
		start := time.Now()
		res, err := s.fsys.cfg.Search.Search(ctx, t, name)
		s.logSearch(ctx, searchName+"/"+name, res, start, err)
		if err != nil {
			return nil, searchErrno(err)
		}
		return s.results(ctx, t, name, res, out), 0
	}
	base, k := name, 0
	if i := strings.LastIndexByte(name, '?'); i >= 0 && t.Lookup(path.Join(s.prefix, name)) == nil {
		n, ok, err := search.ParseOptions(name[i+1:]) // a page called x?k=5.md is that page
		if err != nil {
			return nil, searchErrno(err)
		}
		if ok {
			base, k = name[:i], n
		}
	}
	p := path.Join(s.prefix, base)
	n := t.Lookup(p)
	switch {
	case n == nil || n.Link != nil || n == t.Report || base == "." || base == "..":
		return nil, syscall.ENOENT // a link's target has its own path; the report is no page
	case n.IsDir():
		sub := &searchDir{fsys: s.fsys, similar: true, prefix: p, depth: s.depth + 1}
		return s.fsys.searchInode(ctx, &s.Inode, sub, "dir\x00"+similarName+"/"+p, t, out), 0
	}
	start := time.Now()
	res, err := s.fsys.cfg.Search.SimilarTo(ctx, t, p, k)
	s.logSearch(ctx, similarName+"/"+p, res, start, err)
	if err != nil {
		return nil, searchErrno(err)
	}
	return s.results(ctx, t, similarName+"/"+name, res, out), 0
}

// results makes the directory of res: links to the pages, and .results.
func (s *searchDir) results(ctx context.Context, t *tree.Tree, name string, res *search.Results, out *fuse.EntryOut) *fs.Inode {
	up := strings.Repeat("../", s.depth+1)
	r := &resultDir{fsys: s.fsys, report: res.Report()}
	for i, h := range res.Hits {
		r.links = append(r.links, resultLink{name: search.LinkName(i, res.Query.K, path.Base(h.Path)), target: up + h.Path})
	}
	key := "results\x00" + s.prefix + "\x00" + name
	if s.similar {
		key = "similar\x00" + s.prefix + "\x00" + name
	}
	return s.fsys.searchInode(ctx, &s.Inode, r, key, t, out)
}

func (s *searchDir) logSearch(ctx context.Context, p string, res *search.Results, start time.Time, err error) {
	if !s.fsys.logging() {
		return
	}
	ev := accesslog.Event{Op: "search", Path: p}
	if res != nil {
		n := len(res.Hits)
		ev.Entries = &n
	}
	s.fsys.access(ctx, ev, start, searchErrno(err))
}

// searchErrno is toErrno for a search: a query that cannot run is EINVAL,
// a mode the collection cannot give EOPNOTSUPP; a failure is EIO.
func searchErrno(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, search.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, search.ErrUnsupported):
		return syscall.EOPNOTSUPP
	case errors.As(err, &errno) && errno == syscall.ENOENT:
		return syscall.EIO // never a missing file for a failed search
	}
	return toErrno(err)
}

// resultDir is one search's answer: relative links to the pages, best
// first, and .results.
type resultDir struct {
	fs.Inode
	readOnly
	fsys   *FS
	links  []resultLink
	report []byte
}

type resultLink struct{ name, target string }

var (
	_ = (fs.NodeLookuper)((*resultDir)(nil))
	_ = (fs.NodeReaddirer)((*resultDir)(nil))
	_ = (fs.NodeGetattrer)((*resultDir)(nil))
)

func (r *resultDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	r.fsys.searchAttr(syscall.S_IFDIR|0o555, 0, &out.Attr)
	return 0
}

func (r *resultDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	entries := append(dots(&r.Inode), fuse.DirEntry{Name: resultsName, Mode: syscall.S_IFREG})
	for _, l := range r.links {
		entries = append(entries, fuse.DirEntry{Name: l.name, Mode: syscall.S_IFLNK})
	}
	return fs.NewListDirStream(entries), 0
}

func (r *resultDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t := r.fsys.tree.Load()
	base := "in\x00" + strconv.FormatUint(r.StableAttr().Ino, 16) + "\x00"
	if name == resultsName {
		return r.fsys.searchInode(ctx, &r.Inode, &memFile{data: r.report}, base+name, t, out), 0
	}
	for _, l := range r.links {
		if l.name == name {
			return r.fsys.searchInode(ctx, &r.Inode, &memLink{target: l.target}, base+name, t, out), 0
		}
	}
	return nil, syscall.ENOENT
}

// memFile is a read-only file of bytes held in memory (.README, .results).
type memFile struct {
	fs.Inode
	readOnly
	fsys *FS
	data []byte
}

var (
	_ = (fs.NodeOpener)((*memFile)(nil))
	_ = (fs.NodeReader)((*memFile)(nil))
	_ = (fs.NodeGetattrer)((*memFile)(nil))
)

// Open is never asked after the first fileNode answered ENOSYS (the
// kernel stops sending OPEN); before that it opens without a handle.
func (m *memFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (m *memFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(m.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(m.data[off:min(int64(len(m.data)), off+int64(len(dest)))]), 0
}

func (m *memFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	m.fsys.searchAttr(syscall.S_IFREG|0o444, uint64(len(m.data)), &out.Attr)
	return 0
}

// memLink is a result's relative symbolic link to its page.
type memLink struct {
	fs.Inode
	readOnly
	fsys   *FS
	target string
}

var (
	_ = (fs.NodeReadlinker)((*memLink)(nil))
	_ = (fs.NodeGetattrer)((*memLink)(nil))
)

func (l *memLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) { return []byte(l.target), 0 }

func (l *memLink) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.fsys.searchAttr(syscall.S_IFLNK|0o777, uint64(len(l.target)), &out.Attr)
	return 0
}

// searchInode makes the inode of a search node below parent. Its number
// is a hash of key and the tree version, keyed by a seed of this mount's
// (no name can be made to hit a chosen number), with the top bit set: one
// answer keeps one inode, a new tree version gets new ones, and a clash
// with a page's number (FNV hashes of paths) is as unlikely as one between
// two pages.
func (f *FS) searchInode(ctx context.Context, parent *fs.Inode, n fs.InodeEmbedder, key string, t *tree.Tree, out *fuse.EntryOut) *fs.Inode {
	var mode uint32
	switch v := n.(type) {
	case *searchDir:
		mode = syscall.S_IFDIR | 0o555
	case *resultDir:
		mode = syscall.S_IFDIR | 0o555
	case *memFile:
		v.fsys = f
		mode = syscall.S_IFREG | 0o444
		out.Attr.Size = uint64(len(v.data))
	case *memLink:
		v.fsys = f
		mode = syscall.S_IFLNK | 0o777
		out.Attr.Size = uint64(len(v.target))
	}
	ino := maphash.String(f.searchSeed, t.Version+"\x00"+key) | 1<<63
	f.searchAttr(mode, out.Attr.Size, &out.Attr)
	out.Attr.Ino = ino
	return parent.NewInode(ctx, n, fs.StableAttr{Mode: mode & syscall.S_IFMT, Ino: ino})
}

// searchAttr fills the attributes of a search node: the mount's owner, the
// root's mtime, whole 4 KiB blocks.
func (f *FS) searchAttr(mode uint32, size uint64, a *fuse.Attr) {
	root := f.tree.Load().Root
	a.Mode, a.Size = mode, size
	a.Uid, a.Gid = f.cfg.UID, f.cfg.GID
	a.Nlink = 1
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		a.Nlink, a.Size, size = 2, dirSize, dirSize
	}
	a.Mtime, a.Atime, a.Ctime = uint64(max(root.Mtime, 0)), uint64(max(root.Mtime, 0)), uint64(max(root.Mtime, 0))
	a.Mtimensec, a.Atimensec, a.Ctimensec = root.Nsec, root.Nsec, root.Nsec
	a.Blksize = 4096
	a.Blocks = (size + 4095) / 4096 * 8
	if mode&syscall.S_IFMT == syscall.S_IFLNK && size < fastLink {
		a.Blocks = 0
	}
}
