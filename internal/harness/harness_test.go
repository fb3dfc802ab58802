package harness

import (
	"errors"
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
	"time"
)

// TestLogConcurrent writes from many goroutines while reading (run with
// -race: the reason Log exists) and keeps every byte.
func TestLogConcurrent(t *testing.T) {
	var l Log
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&l, "writer %d\n", i)
			}
		}()
	}
	for range 50 {
		_ = l.String()
	}
	wg.Wait()
	if n := strings.Count(l.String(), "\n"); n != 800 {
		t.Errorf("%d lines, want 800", n)
	}
	if got := fmt.Sprint(&l); got != l.String() {
		t.Errorf("fmt prints %q, not the log", got[:min(len(got), 40)])
	}
}

func TestLogAsProcessOutput(t *testing.T) {
	var l Log
	cmd := exec.Command("sh", "-c", "echo out; echo err >&2")
	cmd.Stdout, cmd.Stderr = &l, &l
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got := l.String(); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
		t.Errorf("log %q, want both streams", got)
	}
}

func TestMetric(t *testing.T) {
	page := "# HELP x a counter\n# TYPE x counter\nchromafs_chroma_requests_total 42\nchromafs_cache_bytes 1.048576e+06\nwith_labels{a=\"b\"} 7\nbad NaNx\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, page)
	}))
	defer srv.Close()
	tests := []struct {
		name    string
		want    int64
		wantErr error
	}{
		{"chromafs_chroma_requests_total", 42, nil},
		{"chromafs_cache_bytes", 1 << 20, nil},
		{"with_labels", 0, ErrNoMetric},
		{"absent_total", 0, ErrNoMetric},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Metric(srv.URL+"/metrics", tc.name)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("Metric = %d, %v; want %d, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := Metric(srv.URL+"/metrics", "bad"); err == nil || errors.Is(err, ErrNoMetric) {
		t.Errorf("a value that is no number: %v, want a parse error", err)
	}
	if _, err := Metric(srv.URL+"/other", "x"); err == nil {
		t.Error("a 404 page scraped without an error")
	}
	all, err := Metrics(srv.URL+"/metrics", "chromafs_chroma_requests_total", "chromafs_cache_bytes")
	if err != nil || len(all) != 2 || all["chromafs_chroma_requests_total"] != 42 || all["chromafs_cache_bytes"] != 1<<20 {
		t.Errorf("Metrics of two names: %v, %v", all, err)
	}
	if _, err := Metrics(srv.URL+"/metrics", "chromafs_cache_bytes", "absent_total"); !errors.Is(err, ErrNoMetric) {
		t.Errorf("Metrics with one name absent: %v, want ErrNoMetric", err)
	}
}

func TestFilesAndPages(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"b/page-0002.md", "a/page-0001.mdx", "a b/with space.md", "large/big-0.md", "page-dir/x.md"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a/page-0001.mdx", filepath.Join(root, "page-link")); err != nil {
		t.Fatal(err)
	}
	files, err := Files(root)
	if want := []string{"a b/with space.md", "a/page-0001.mdx", "b/page-0002.md", "large/big-0.md", "page-dir/x.md"}; err != nil || !slices.Equal(files, want) {
		t.Errorf("Files = %q, %v; want %q", files, err, want)
	}
	pages, err := Pages(root)
	if want := []string{"a/page-0001.mdx", "b/page-0002.md"}; err != nil || !slices.Equal(pages, want) {
		t.Errorf("Pages = %q, %v; want %q", pages, err, want)
	}
	if _, err := Files(filepath.Join(root, "missing")); err == nil {
		t.Error("Files of a missing directory: no error")
	}
}

func TestEachFile(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	for dir, files := range map[string]map[string]string{src: {"same": "1", "differs": "2", "missing": "3"}, mnt: {"same": "1", "differs": "x"}} {
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]string{}
	err := EachFile(mnt, src, func(rel string, got, want []byte, readErr error) {
		switch {
		case readErr != nil:
			seen[rel] = "unreadable"
		case string(got) != string(want):
			seen[rel] = "differs"
		default:
			seen[rel] = "same"
		}
	})
	want := map[string]string{"same": "same", "differs": "differs", "missing": "unreadable"}
	if err != nil || fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("EachFile saw %v, %v; want %v", seen, err, want)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		script string
		want   int
	}{{"exit 0", 0}, {"exit 3", 3}, {"exit 66", 66}, {"kill -KILL $$", -1}}
	for _, tc := range tests {
		if got := ExitCode(exec.Command("sh", "-c", tc.script).Run()); got != tc.want {
			t.Errorf("%s: ExitCode %d, want %d", tc.script, got, tc.want)
		}
	}
	if got := ExitCode(errors.New("not an exit")); got != -1 {
		t.Errorf("ExitCode of another error: %d, want -1", got)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(time.Second, time.Millisecond, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Errorf("Poll: %v after %d calls, want nil after 3", err, n)
	}
	start := time.Now()
	if err := Poll(30*time.Millisecond, time.Millisecond, func() bool { return false }); err == nil {
		t.Error("Poll of a condition that never holds: no error")
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
		t.Errorf("Poll gave up after %s, want about 30ms", d)
	}
}

func TestFreePort(t *testing.T) {
	p, err := FreePort()
	if err != nil || p <= 0 || p > 65535 {
		t.Fatalf("FreePort = %d, %v", p, err)
	}
}

func TestRepoRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(RepoRoot(), "scripts", "chroma-server.sh")); err != nil {
		t.Errorf("RepoRoot %s holds no scripts/chroma-server.sh: %v", RepoRoot(), err)
	}
}

func TestFileSets(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	for dir, files := range map[string][]string{
		src: {"a.md", "d/b.md", "gone.md"},
		mnt: {"a.md", "d/b.md", "d/extra.md", ".report.txt", "z.md"},
	} {
		for _, name := range files {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(mnt, "empty-dir"), 0o755); err != nil { // directories are not files
		t.Fatal(err)
	}
	extra, missing, err := FileSets(mnt, src, ".report.txt")
	if want := []string{"d/extra.md", "z.md"}; err != nil || !slices.Equal(extra, want) {
		t.Errorf("FileSets extra = %q, %v; want %q", extra, err, want)
	}
	if want := []string{"gone.md"}; !slices.Equal(missing, want) {
		t.Errorf("FileSets missing = %q; want %q", missing, want)
	}
	if extra, missing, err := FileSets(src, src); err != nil || extra != nil || missing != nil {
		t.Errorf("FileSets of a tree with itself: %q %q %v; want nothing", extra, missing, err)
	}
	if extra, _, _ := FileSets(mnt, src); !slices.Contains(extra, ".report.txt") {
		t.Errorf("FileSets without ignore leaves out .report.txt: %q", extra)
	}
	if _, _, err := FileSets(filepath.Join(mnt, "absent"), src); err == nil {
		t.Error("FileSets of a missing directory: no error")
	}
}
