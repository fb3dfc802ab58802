package mountcmd

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/internal/mountstart"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"256MiB", 256 << 20, true}, {"1GiB", 1 << 30, true}, {"1.5GiB", 3 << 29, true},
		{"512K", 512 << 10, true}, {"2M", 2 << 20, true}, {"1G", 1 << 30, true},
		{"1000KB", 1_000_000, true}, {"4096", 4096, true}, {"10B", 10, true}, {" 8 MiB ", 8 << 20, true},
		{"", 0, false}, {"lots", 0, false}, {"-1MiB", 0, false}, {"0", 0, false}, {"5PiB", 0, false},
	}
	for _, tc := range tests {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestMountHelperOptions(t *testing.T) {
	t.Setenv("CHROMAFS_COLLECTION", "")
	o, err := parseFlags([]string{"-o", "ro,collection=docs,groups=a,cache_size=1GiB,prefetch=none,allow_other,default_permissions", "/mnt/x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.conn.Collection != "docs" || o.groups != "a" || o.cacheBytes != 1<<30 || o.prefetch != "none" || !o.allowOther {
		t.Errorf("-o not applied: %+v", o)
	}
	if !reflect.DeepEqual(o.fuseOpts, []string{"default_permissions"}) || o.mountpoint != "/mnt/x" {
		t.Errorf("fuse options %v, mountpoint %q", o.fuseOpts, o.mountpoint)
	}
	// mount(8) puts options after the mount point
	o, err = parseFlags([]string{"/mnt/y", "-o", "collection=docs"}, io.Discard)
	if err != nil || o.mountpoint != "/mnt/y" || o.conn.Collection != "docs" {
		t.Errorf("options after the mount point: %+v, %v", o, err)
	}
	for _, bad := range []string{"rw", "token=abc", "chroma_token=abc", "cache_size=lots", "prefetch=sometimes"} {
		if _, err := parseFlags([]string{"-o", "collection=docs," + bad, "/mnt/x"}, io.Discard); err == nil {
			t.Errorf("-o %s accepted", bad)
		}
	}
	if _, err := parseFlags([]string{"--collection", "docs"}, io.Discard); err == nil || !strings.Contains(err.Error(), "MOUNTPOINT") {
		t.Errorf("missing mount point: %v", err)
	}
}

func TestValuesTheIssueNamed(t *testing.T) {
	o, err := parseFlags([]string{"--collection", "docs", "--cache-size", "1TB", "--metrics-addr", ":9464", "/mnt/x"}, io.Discard)
	if err != nil || o.cacheBytes != 1e12 {
		t.Errorf("--cache-size 1TB: %v, %d bytes", err, o.cacheBytes)
	}
	o, err = parseFlags([]string{"--collection", "chromafs:docs", "/mnt/x"}, io.Discard)
	if err != nil || o.conn.Collection != "docs" {
		t.Errorf("--collection chromafs:docs: %v, %q", err, o.conn.Collection)
	}
	for _, bad := range []string{"9464", "localhost", "127.0.0.1:99999", "127.0.0.1:x", "a b:1"} {
		if _, err := parseFlags([]string{"--collection", "docs", "--metrics-addr", bad, "/mnt/x"}, io.Discard); err == nil {
			t.Errorf("--metrics-addr %q accepted", bad)
		}
	}
	// --reload and --unmount need only the mount point
	t.Setenv("CHROMA_URL", "")
	if o, err := parseFlags([]string{"--reload", "/mnt/x"}, io.Discard); err != nil || !o.reload || o.mountpoint != "/mnt/x" {
		t.Errorf("--reload: %+v, %v", o, err)
	}
}

func TestHelperArgs(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
		fake bool
	}{
		{[]string{"docs", "/mnt/docs", "-o", "rw,_netdev,noauto,x-systemd.automount,chroma_url=http://h:8000,groups=support,dev,suid"},
			"--collection docs --fsname docs --daemon -o chroma_url=http://h:8000,groups=support /mnt/docs", false},
		{[]string{"docs", "/mnt/docs", "-n", "-o", "defaults,foreground", "-t", "fuse.chromafs"}, "--collection docs --fsname docs /mnt/docs", false},
		{[]string{"-f", "docs", "/mnt/docs"}, "--collection docs --fsname docs --daemon /mnt/docs", true},
		{[]string{"none", "/mnt/docs", "-o", "collection=docs"}, "--fsname none --daemon -o collection=docs /mnt/docs", false},
		{[]string{"chromafs:docs", "/mnt/docs", "-o", "ro"}, "--collection docs --daemon /mnt/docs", false},
		{[]string{"chromafs:none", "/mnt/docs"}, "--collection none --daemon /mnt/docs", false},
		{[]string{"chromafs:", "/mnt/docs", "-o", "collection=docs"}, "--fsname chromafs: --daemon -o collection=docs /mnt/docs", false},
	} {
		got, fake, err := helperArgs(c.in)
		if err != nil || strings.Join(got, " ") != c.want || fake != c.fake {
			t.Errorf("helperArgs(%q) = %q fake=%v %v; want %q fake=%v", c.in, got, fake, err, c.want, c.fake)
		}
		if _, err := parseFlags(got, io.Discard); err != nil {
			t.Errorf("the translated arguments %q do not parse: %v", got, err)
		}
	}
	if _, _, err := helperArgs([]string{"/srv/work/docs", "/mnt/docs"}); err == nil || !strings.Contains(err.Error(), "write the source as chromafs:docs") {
		t.Errorf("a source that mount(8) made a path: %v, want the chromafs: advice", err)
	}
	for _, bad := range [][]string{{"docs"}, {"docs", "/m", "-x"}, {"a", "b", "c"}} {
		if _, _, err := helperArgs(bad); err == nil {
			t.Errorf("helperArgs(%q) accepted", bad)
		}
	}
	if !isHelper("/sbin/mount.chromafs") || !isHelper("mount.fuse.chromafs") || isHelper("chromafs-mount") {
		t.Error("isHelper")
	}
}

// TestLauncherReadsAsTheCommand: chromafs-mount's launcher
// (mountstart.Scan) knows every flag of the command, and starts a
// --daemon mount, with the command's Chroma URL, only where the command
// reads one.
func TestLauncherReadsAsTheCommand(t *testing.T) {
	fs := newFlagSet(&options{}, io.Discard)
	seen := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		seen[f.Name] = true
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		isBool := ok && b.IsBoolFlag()
		if got, known := mountstart.Flags[f.Name]; !known || got != isBool {
			t.Errorf("flag %q (boolean: %v) is not in mountstart.Flags as such (known %v, boolean %v)", f.Name, isBool, known, got)
		}
	})
	for name := range mountstart.Flags {
		if !seen[name] {
			t.Errorf("mountstart.Flags has %q, which the command does not", name)
		}
	}

	// the environment the flags' defaults and checks read, pinned
	for k, v := range map[string]string{"CHROMAFS_COLLECTION": "", "CHROMA_URL": "https://env.example", "CHROMA_TENANT": "",
		"CHROMA_DATABASE": "", "CHROMA_TOKEN_FILE": "", "CHROMA_TOKEN": "", "HOME": t.TempDir(), "XDG_CACHE_HOME": ""} {
		t.Setenv(k, v)
	}
	for _, c := range []struct {
		args   []string
		daemon bool // the launcher starts it
	}{
		{[]string{"--daemon", "--collection", "docs", "--chroma-url", "https://c.example", "/mnt/x"}, true},
		{[]string{"--collection=docs", "/mnt/x", "--daemon", "-chroma-url=http://c:8000"}, true},
		{[]string{"-o", "collection=docs,daemon,chroma_url=https://c.example:8443,allow_other", "/mnt/x"}, true},
		{[]string{"-daemon", "-collection", "docs", "/mnt/x"}, true}, // the URL from the environment
		{[]string{"--daemon", "--collection", "docs", "--log-file", "--daemon", "/mnt/x"}, true},
		{[]string{"--log-file", "--daemon", "--collection", "docs", "/mnt/x"}, false}, // --daemon only as a value
		{[]string{"--daemon=false", "--collection", "docs", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "-o", "daemon=false", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "--reload", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "--version", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "/mnt/x", "/mnt/y"}, false},
		{[]string{"--daemon", "--collection", "docs", "--", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "--bogus", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "-h", "/mnt/x"}, false},
		{[]string{"--daemon=maybe", "--collection", "docs", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "-o", "rw", "/mnt/x"}, false},
		{[]string{"--daemon", "--collection", "docs", "/mnt/x", "--chroma-url"}, false},
		{[]string{"--daemon", "--collection", "docs"}, false},
	} {
		r := mountstart.Scan(c.args)
		if r.Daemon != c.daemon {
			t.Errorf("%q: the launcher starts a --daemon mount: %v, want %v", c.args, r.Daemon, c.daemon)
		}
		o, err := parseFlags(c.args, io.Discard)
		if r.Daemon && (err != nil || !o.daemon || o.reload || o.unmount || o.version) {
			t.Errorf("%q: the launcher starts a --daemon mount; the command reads %+v, %v", c.args, o, err)
		}
		if r.Daemon && r.URL != o.conn.URL {
			t.Errorf("%q: the launcher dials %q, the command %q", c.args, r.URL, o.conn.URL)
		}
	}
}
