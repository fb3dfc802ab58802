package integration_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestExecBitAndNanoseconds: the executable bit survives (0555 vs 0444),
// and mtimes keep their nanoseconds: stat on the mount prints what it
// prints on the source.
func TestExecBitAndNanoseconds(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	writeSource(t, src, map[string]string{"bin/run.sh": "#!/bin/sh\necho hi\n", "bin/tool": "\x7fELF\x02\x01\x01\x00binary", "doc.md": "# doc\n"})
	must(t, os.Chmod(filepath.Join(src, "bin/run.sh"), 0o755))
	must(t, os.Chmod(filepath.Join(src, "bin/tool"), 0o700))
	for i, p := range []string{"bin/run.sh", "bin/tool", "doc.md"} {
		at := time.Unix(1700000000+int64(i), int64(123456789*(i+1)%1000000000))
		must(t, os.Chtimes(filepath.Join(src, p), at, at))
	}
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	readOnlyTree(t, src)
	must(t, os.Chmod(filepath.Join(src, "bin/run.sh"), 0o555))
	must(t, os.Chmod(filepath.Join(src, "bin/tool"), 0o555))
	mnt := mountDir(t, parent)
	startMount(t, name, mnt)
	sameOutput(t, mnt, src, "stat -c '%a %s %y %n' bin/run.sh bin/tool doc.md; ./bin/run.sh")
	if out, code := sh(t, mnt, "stat -c %y doc.md", false); code != 0 || out == "" || !containsNanos(out) {
		t.Errorf("doc.md mtime %q has no nanoseconds", out)
	}
}

func containsNanos(s string) bool { return len(s) > 20 && s[19] == '.' && s[20:29] != "000000000" }
