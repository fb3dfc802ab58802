package integration_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/harness"
)

// fileServer publishes a directory over HTTP (ranged requests, as any
// static file server) and records the Range header of every request.
type fileServer struct {
	URL    string
	mu     sync.Mutex // protects ranges
	ranges []string
}

func newFileServer(t *testing.T, dir string) *fileServer {
	t.Helper()
	fsrv := &fileServer{}
	files := http.StripPrefix("/files", http.FileServer(http.Dir(dir)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fsrv.mu.Lock()
		fsrv.ranges = append(fsrv.ranges, r.URL.Path+" "+r.Header.Get("Range"))
		fsrv.mu.Unlock()
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fsrv.URL = srv.URL
	return fsrv
}

func (f *fileServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ranges...)
}

// TestLazyPointers: files over --lazy-over or matching --lazy-match are
// recorded as pointers to where they are published (no chunks written,
// through the Cloud-limits proxy), read back byte-exact with ranged
// requests, under the same access control as any page; a file changed
// behind its pointer is EIO, never other bytes. A Mintlify-layout tree
// with a pointer mounts too.
func TestLazyPointers(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	writeSource(t, src, map[string]string{
		"page.md":               "# a page in chunks\n",
		"notes/secret-plan.md":  "---\npublic: false\ngroups: [team]\n---\nthe plan\n",
		"notes/public-notes.md": "notes\n",
	})
	writeBinary(t, filepath.Join(src, "media/big.bin"), 3<<20+512<<10+77)
	writeBinary(t, filepath.Join(src, "docs/manual.pdf"), 20<<10)
	readOnlyTree(t, src)
	pub := filepath.Join(parent, "published")
	must(t, exec.Command("cp", "-a", src, pub).Run())
	files := newFileServer(t, pub)
	q := newQuotaProxy(t, env.url)
	name := collectionName(t)
	out, errOut, code := ingestCmd(t, nil, "--chroma-url", q.URL, "--collection", name, "--quiet",
		"--lazy-base-url", files.URL+"/files", "--lazy-over", "1MiB", "--lazy-match", "*.pdf", "--lazy-match", "secret-*.md", src)
	if code != 0 || !strings.Contains(out, "3 lazy pointers") || q.BadWrites.Load() != 0 {
		t.Fatalf("ingest: exit %d, %d refused writes: %s%s", code, q.BadWrites.Load(), out, errOut)
	}
	if n := len(files.requests()); n != 0 {
		t.Errorf("ingest fetched %d published files", n)
	}
	team := mountDir(t, subdir(t, parent, "team"))
	startMountEnv(t, nil, name, team, q.URL, "--groups", "team")
	sameOutput(t, team, src, "dd if=media/big.bin bs=4096 skip=700 count=3 2>/dev/null | md5sum; tail -c 100 docs/manual.pdf | md5sum; cat notes/secret-plan.md; stat -c '%s %a' media/big.bin")
	// the read at 2.7 MiB needs piece 2; the kernel's readahead may ask
	// for piece 3 too; nothing else of the file is fetched
	pieces := map[string]bool{"/files/media/big.bin bytes=2097152-3145727": true, "/files/media/big.bin bytes=3145728-3670092": true}
	saw := false
	for _, r := range files.requests() {
		if !strings.Contains(r, "bytes=") {
			t.Errorf("a request without a range: %q", r)
		}
		if strings.HasPrefix(r, "/files/media/big.bin") && !pieces[r] {
			t.Errorf("a read of 12 KiB at 2.7 MiB fetched %q, want only the pieces it covers", r)
		}
		saw = saw || strings.HasSuffix(r, "bytes=2097152-3145727")
	}
	if !saw {
		t.Errorf("piece 2 was never fetched: %q", files.requests())
	}
	if out, code := sh(t, parent, "diff -r team/mnt src", true); code != 0 || out != "" {
		t.Errorf("diff -r: exit %d: %.1000s", code, out)
	}
	public := mountDir(t, subdir(t, parent, "public"))
	startMountEnv(t, nil, name, public, q.URL)
	hiddenIsAbsent(t, public, "notes/secret-plan.md")
	// and nothing else is missing, nothing added: the public view shows
	// every other file, pointers and chunked pages alike
	extra, missing, err := harness.FileSets(public, src)
	must(t, err)
	if len(extra) != 0 || !slices.Equal(missing, []string{"notes/secret-plan.md"}) {
		t.Errorf("the public view's files: %q more, %q missing; want only notes/secret-plan.md missing", extra, missing)
	}
	if out, code := sh(t, parent, "cmp public/mnt/media/big.bin src/media/big.bin && cmp public/mnt/docs/manual.pdf src/docs/manual.pdf", true); code != 0 {
		t.Errorf("the public view's pointers: exit %d %s", code, out)
	}

	changed, err := os.ReadFile(filepath.Join(pub, "media/big.bin"))
	must(t, err)
	changed[3<<20+100] ^= 0x55 // in the last piece
	must(t, os.WriteFile(filepath.Join(pub, "media/big.bin"), changed, 0o644))
	fresh := mountDir(t, subdir(t, parent, "fresh"))
	freshMount := startMountEnv(t, nil, name, fresh, q.URL)
	if out, code := sh(t, fresh, "head -c 1000 media/big.bin | md5sum", false); code != 0 || out != md5Of(t, filepath.Join(src, "media/big.bin"), 1000) {
		t.Errorf("an unchanged piece of a changed file: exit %d %q", code, out)
	}
	if out, code := sh(t, fresh, "cat media/big.bin > /dev/null", true); code == 0 || !strings.Contains(out, "Input/output error") {
		t.Errorf("a file changed behind its pointer: exit %d %q, want EIO", code, out)
	}

	freshMount.stop(t) // its reads (and readahead) are over: what follows is the fenced mount's
	before := len(files.requests())
	fenced := mountDir(t, subdir(t, parent, "fenced"))
	startMountEnv(t, nil, name, fenced, q.URL, "--lazy-allow", "https://elsewhere.example/")
	if out, code := sh(t, fenced, "cat docs/manual.pdf > /dev/null", true); code == 0 || !strings.Contains(out, "Input/output error") {
		t.Errorf("a pointer outside --lazy-allow: exit %d %q, want EIO", code, out)
	}
	if out, code := sh(t, fenced, "cat page.md", false); code != 0 || out != "# a page in chunks\n" {
		t.Errorf("a chunked page beside a fenced pointer: exit %d %q", code, out)
	}
	if n := len(files.requests()) - before; n != 0 {
		t.Errorf("a mount with --lazy-allow elsewhere sent %d requests to the file server", n)
	}
}

func md5Of(t *testing.T, p string, n int) string {
	t.Helper()
	out, code := sh(t, filepath.Dir(p), fmt.Sprintf("head -c %d %q | md5sum", n, filepath.Base(p)), false)
	if code != 0 {
		t.Fatalf("md5 of %s", p)
	}
	return out
}

// TestMintlifyTreeWithLazyPointer: a flat Mintlify-shaped tree (isPublic,
// groups) whose entry carries only a uri, its size and sha256 mounts, and
// the page reads back byte-exact from where it is published.
func TestMintlifyTreeWithLazyPointer(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	pub := filepath.Join(parent, "published")
	writeBinary(t, filepath.Join(pub, "video.mp4"), 1<<20+333)
	files := newFileServer(t, pub)
	data, err := os.ReadFile(filepath.Join(pub, "video.mp4"))
	must(t, err)
	sum := sha256.Sum256(data)
	doc := fmt.Sprintf(`{"assets/video": {"isPublic": true, "groups": [], "uri": %q, "size": %d, "sha256": %q},
		"index": {"isPublic": true, "groups": []}}`, files.URL+"/files/video.mp4", len(data), hex.EncodeToString(sum[:]))
	name := writeRaw(t, []chroma.Record{treeRecord(doc), chunkRec("i0", "index", 0, "# Home\n")})
	mnt := mountDir(t, parent)
	startMount(t, name, mnt)
	if out, code := sh(t, parent, "cmp mnt/assets/video.mdx published/video.mp4 && cat mnt/index.mdx", true); code != 0 || out != "# Home\n" {
		t.Errorf("exit %d: %q", code, out)
	}
}

// subdir makes parent/name.
func subdir(t *testing.T, parent, name string) string {
	t.Helper()
	p := filepath.Join(parent, name)
	must(t, os.Mkdir(p, 0o755))
	return p
}
