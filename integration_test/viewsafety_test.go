package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
)

// The views' safety against the red team's findings (issue 28), each as it
// was found: records of other tools written into a real Chroma server,
// a real root chromafsd, and views attached by the chromafs client as uid
// 65534 through the real socket, read by that user.

// foreignRec is a record another tool wrote: a document and its metadata.
func foreignRec(id, doc string, meta map[string]any) chroma.Record {
	return chroma.Record{ID: id, Text: doc, Metadata: newMeta(meta)}
}

// safetyPolicy grants uid 65534 groups of collections, for a daemon.
func safetyPolicy(t *testing.T, groups string, collections ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	must(t, os.WriteFile(p, []byte(fmt.Sprintf("- users: [65534]\n  collections: [%s]\n  groups: [%s]\n", strings.Join(collections, ", "), groups)), 0o600))
	return p
}

// userSh runs script in dir as uid (group 65534), and returns its combined
// output and exit code.
func userSh(t *testing.T, uid int, dir, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), "--regid=65534", "--clear-groups", "sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(t, err)
}

// attachAs attaches a view of collection for uid at a new directory it
// owns, with the client's further args, and returns the directory.
func attachAs(t *testing.T, d *daemonProc, uid int, name, collection string, args ...string) string {
	t.Helper()
	p := d.dirFor(uid, name)
	if out, code := d.run(uid, append(append([]string{"attach", "--collection", collection}, args...), p)...); code != 0 {
		b, _ := os.ReadFile(d.logFile)
		t.Fatalf("attach %s: exit %d: %s\ndaemon log:\n%s", name, code, out, b)
	}
	return p
}

// absentFor checks that path is ENOENT to uid in every way it may ask.
func absentFor(t *testing.T, uid int, dir, path string) {
	t.Helper()
	for _, script := range []string{"stat -- " + path, "cat -- " + path, "ls -- " + path} {
		if out, code := userSh(t, uid, dir, script); code == 0 || !strings.Contains(out, "No such file or directory") {
			t.Errorf("%s as uid %d: exit %d %q, want ENOENT", script, uid, code, out)
		}
	}
}

// TestViewSafetyMergedFile (finding 2): records grouped into one file by a
// path key the client chose (kind) — a billing record, an admin record
// holding the admin's secret, a public one — give a file a [billing] view
// must not show: its groups were the union of its records' (admin and
// billing), so the view read the admin text. A file is now shown only
// where every record of it may be seen: doc is ENOENT and grep -r finds
// no HUNTER2, while the file of billing records alone is served.
func TestViewSafetyMergedFile(t *testing.T) {
	requireFUSE(t) // and a server
	requireRoot(t)
	name := writeRaw(t, []chroma.Record{
		foreignRec("b1", "Invoices are due in 30 days.\n", map[string]any{"acl": "billing", "kind": "doc"}),
		foreignRec("a1", "HUNTER2 is the admin password.\n", map[string]any{"acl": "admin", "kind": "doc"}),
		foreignRec("p1", "Welcome to the docs.\n", map[string]any{"kind": "doc"}),
		foreignRec("i1", "Billing runbook: refunds within 14 days.\n", map[string]any{"acl": "billing", "kind": "runbook"}),
	})
	d := startDaemon(t, "--groups-key", "acl", "--policy", safetyPolicy(t, "billing", name))
	p := attachAs(t, d, 65534, "billing", name, "--groups", "billing", "--layout", "custom", "--path-key", "kind")
	if out, code := userSh(t, 65534, p, "cat runbook"); code != 0 || !strings.Contains(out, "refunds within 14 days") {
		t.Fatalf("the [billing] view does not serve the file of billing records alone: exit %d %q", code, out)
	}
	absentFor(t, 65534, p, "doc")
	if out, code := userSh(t, 65534, p, "grep -r HUNTER2 ."); code != 1 || out != "" {
		t.Errorf("grep -r HUNTER2 in the [billing] view: exit %d %q, want nothing found", code, out)
	}
	if out, _ := userSh(t, 65534, p, "ls -a"); strings.Contains("\n"+out, "\ndoc\n") {
		t.Errorf("the [billing] view lists doc:\n%s", out)
	}
	// the view's report is there (runbook has no offsets: unordered) and
	// names what the view shows, never doc
	if out, code := userSh(t, 65534, p, "cat .chromafs-reassembly.txt"); code != 0 || !strings.Contains(out, "\trunbook\n") ||
		strings.Contains(out, "\tdoc\n") || strings.Contains(out, "HUNTER2") {
		t.Errorf("the [billing] view's report: exit %d, want it read, naming runbook and not doc:\n%s", code, out)
	}
	// unlisted (issue 33): ls -a and find show the docs alone; chromafs
	// list names the report and counts what it names
	if out, _ := userSh(t, 65534, p, "ls -a; find ."); strings.Contains(out, "reassembly") {
		t.Errorf("the [billing] view lists its report:\n%s", out)
	}
	if out, code := d.run(65534, "list"); code != 0 || !strings.Contains(out, "not byte-exact (reassembled from another tool's chunks): 1 of its files") || !strings.Contains(out, ".chromafs-reassembly.txt") {
		t.Errorf("chromafs list does not name the view's report: exit %d\n%s", code, out)
	}
}

// TestViewSafetyStaleIndex (finding 3): chromafs-ingest index --groups-key
// acl writes an index whose entries carry the records' groups, and which
// a daemon without --groups-key serves as it is: a public view shows the
// public file only. Once another record is added, the index is stale and
// the daemon scans the records instead: it read them without a groups key,
// so after chromafs refresh admin.md and billing.md were public. The index
// now records its groups key, and the scan reads groups under it.
func TestViewSafetyStaleIndex(t *testing.T) {
	requireFUSE(t) // and a server
	requireRoot(t)
	lc := func(id, file, text string, groups string) chroma.Record {
		m := map[string]any{"source": "/docs/" + file, "start_index": 0}
		if groups != "" {
			m["acl"] = groups
		}
		return foreignRec(id, text, m)
	}
	name := writeRaw(t, []chroma.Record{
		lc("u1", "admin.md", "# Admin\n\nHUNTER2 rotates monthly.\n", "admin"),
		lc("u2", "billing.md", "# Billing\n\nInvoices go out on the 1st.\n", "billing"),
		lc("u3", "public.md", "# Public\n\nWelcome.\n", ""),
	})
	if out, errOut, code := ingestCmd(t, nil, "index", "--chroma-url", env.url, "--collection", name, "--groups-key", "acl"); code != 0 || !strings.Contains(out, "layout langchain") {
		t.Fatalf("index: exit %d: %s%s", code, out, errOut)
	}
	st := openStore(t, name)
	if info, err := st.TreeInfo(t.Context()); err != nil || !info.IndexGroupsKeyKnown || info.IndexGroupsKey != "acl" || info.IndexRecords < 0 {
		t.Fatalf("the index's header: %+v, %v; want it to record --groups-key acl", info, err)
	}
	d := startDaemon(t, "--policy", safetyPolicy(t, "billing", name))
	public := attachAs(t, d, 65534, "public", name)
	billing := attachAs(t, d, 65534, "billing", name, "--groups", "billing")
	check := func(when string) {
		t.Helper()
		if out, code := userSh(t, 65534, public, "cat public.md"); code != 0 || !strings.Contains(out, "Welcome") {
			t.Errorf("%s: public.md in the public view: exit %d %q", when, code, out)
		}
		absentFor(t, 65534, public, "admin.md")
		absentFor(t, 65534, public, "billing.md")
		absentFor(t, 65534, billing, "admin.md")
		if out, code := userSh(t, 65534, billing, "cat billing.md"); code != 0 || !strings.Contains(out, "Invoices") {
			t.Errorf("%s: billing.md in the [billing] view: exit %d %q", when, code, out)
		}
		for _, p := range []string{public, billing} {
			if out, code := userSh(t, 65534, p, "grep -r HUNTER2 ."); code != 1 {
				t.Errorf("%s: grep -r HUNTER2 in %s: exit %d %q", when, p, code, out)
			}
		}
	}
	check("the index")
	must(t, st.Upsert(t.Context(), []chroma.Record{lc("u4", "later.md", "# Later\n\nAdded after the index.\n", "")}))
	if out, code := d.run(65534, "refresh", name); code != 0 { // the user, as the red team did
		t.Fatalf("chromafs refresh as uid 65534: exit %d %s", code, out)
	}
	waitFor(t, 20*time.Second, func() bool { _, code := userSh(t, 65534, public, "test -f later.md"); return code == 0 },
		func() string {
			b, _ := os.ReadFile(d.logFile)
			return "the record added after the index never showed:\n" + string(b)
		})
	check("the stale index, scanned")
	if b, _ := os.ReadFile(d.logFile); !strings.Contains(string(b), "index is out of date") {
		t.Errorf("no warning that the index is out of date:\n%s", b)
	}

	// the real server keeps an empty key: an index written without one
	// records that it has none
	if out, errOut, code := ingestCmd(t, nil, "index", "--chroma-url", env.url, "--collection", name); code != 0 {
		t.Fatalf("index without --groups-key: exit %d: %s%s", code, out, errOut)
	}
	if info, err := st.TreeInfo(t.Context()); err != nil || !info.IndexGroupsKeyKnown || info.IndexGroupsKey != "" {
		t.Fatalf("the header of an index without --groups-key: %+v, %v; want the key recorded as none", info, err)
	}
}

// TestViewSafetyReport (finding 4): the list of files not reassembled
// exactly (.chromafs-reassembly.txt) was one public entry naming every
// such file, whatever the view: a [billing] view read the name of the
// admin's file. It is now each view's, naming only what the view shows,
// for a scanned collection and an indexed one alike.
func TestViewSafetyReport(t *testing.T) {
	requireFUSE(t) // and a server
	requireRoot(t)
	recs := func() []chroma.Record {
		lc := func(id, file, groups string) chroma.Record { // LangChain's splitter trims: no file is exact
			m := map[string]any{"source": "/docs/" + file, "start_index": 0}
			if groups != "" {
				m["acl"] = groups
			}
			return foreignRec(id, "# "+file+"\n\nSome text.", m)
		}
		return []chroma.Record{lc("r1", "admin/merger-plan-2026.md", "admin"), lc("r2", "billing/invoices.md", "billing"), lc("r3", "guide.md", "")}
	}
	scanned, indexed := writeRaw(t, recs()), writeRaw(t, recs())
	if out, errOut, code := ingestCmd(t, nil, "index", "--chroma-url", env.url, "--collection", indexed, "--groups-key", "acl"); code != 0 {
		t.Fatalf("index: exit %d: %s%s", code, out, errOut)
	}
	d := startDaemon(t, "--groups-key", "acl", "--policy", safetyPolicy(t, "billing", scanned, indexed))
	for _, name := range []string{scanned, indexed} {
		p := attachAs(t, d, 65534, "billing-"+name, name, "--groups", "billing")
		out, code := userSh(t, 65534, p, "cat .chromafs-reassembly.txt")
		if code != 0 || !strings.Contains(out, "edges\tbilling/invoices.md\n") || !strings.Contains(out, "edges\tguide.md\n") {
			t.Errorf("%s: the [billing] view's report: exit %d\n%s", name, code, out)
		}
		if strings.Contains(out, "merger-plan") || strings.Contains(out, "admin") {
			t.Errorf("%s: the [billing] view's report names the admin's file:\n%s", name, out)
		}
		absentFor(t, 65534, p, "admin")
		if out, code := userSh(t, 65534, p, "grep -rl merger-plan . ; find . -name '*merger*'"); out != "" {
			t.Errorf("%s: the admin's file is named in the [billing] view: exit %d %q", name, code, out)
		}
	}
}
