package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/hostcache"
)

func runCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb strings.Builder
	code := run(args, &out, &errb)
	return out.String() + errb.String(), code
}

func TestStatsVerifyClear(t *testing.T) {
	dir := t.TempDir()
	c, err := hostcache.Open(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, text := range []string{"one page\n", "another page\n", "a third\n"} {
		sum := sha256.Sum256([]byte(text))
		c.Put(cache.PageKey{Collection: "t/d/id", SHA256: hex.EncodeToString(sum[:])}, []byte(text))
	}
	c.Close()
	filepath.Walk(filepath.Join(dir, hostcache.FormatDir), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
			paths = append(paths, p)
		}
		return nil
	})
	keep := filepath.Join(dir, "not-ours.txt")
	os.WriteFile(keep, []byte("x"), 0o600)

	if out, code := runCmd(t, "--cache-dir", dir, "stats"); code != 0 || !strings.Contains(out, "3 entries") {
		t.Errorf("stats: %d %q", code, out)
	}
	raw, _ := os.ReadFile(paths[0])
	raw[len(raw)-1] ^= 1
	os.WriteFile(paths[0], raw, 0o600)
	if out, code := runCmd(t, "--cache-dir", dir, "verify"); code != 0 || !strings.Contains(out, "2 good, 1 bad (removed)") {
		t.Errorf("verify: %d %q", code, out)
	}
	if out, code := runCmd(t, "--cache-dir", dir, "clear"); code != 0 || !strings.Contains(out, "2 entries removed") {
		t.Errorf("clear: %d %q", code, out)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Error("clear removed a file that is not the cache's")
	}
	for _, verb := range []string{"stats", "verify", "clear"} {
		missing := filepath.Join(dir, "typo")
		if out, code := runCmd(t, "--cache-dir", missing, verb); code != 1 || !strings.Contains(out, "no host cache in "+missing) {
			t.Errorf("%s of a mistyped --cache-dir: %d %q, want exit 1 and what is wrong", verb, code, out)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("%s of a mistyped --cache-dir created it", verb)
		}
	}
	if out, code := runCmd(t, "--version"); code != 0 || !strings.HasPrefix(out, "chromafs-cache ") {
		t.Errorf("--version: %d %q", code, out)
	}
	if out, code := runCmd(t, "--cache-dir", dir, "wipe"); code != 2 {
		t.Errorf("unknown verb: %d %q", code, out)
	}
	if out, code := runCmd(t, "--help"); code != 0 || !strings.Contains(out, "Usage: chromafs-cache") {
		t.Errorf("--help: %d %q", code, out)
	}
}
