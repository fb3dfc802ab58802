package integration_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Some tests need the host to be other than it is: mount(8)'s helpers
// (fstab lines, mount -t chromafs) need /sbin/mount.chromafs to be the
// chromafs-mount under test, and fusermount3's refusal of allow_other
// needs an /etc/fuse.conf without user_allow_other (and /dev/fuse modes
// the test sets). Changing the host's files would replace a helper
// scripts/install.sh put there, or an administrator's choice, so such a test runs again in a child of this
// test binary inside a mount namespace of its own, where those paths are
// bound over. Nothing on the host changes, and a host with chromafs
// installed, or with user_allow_other set, runs the test like any other.

const (
	nsTestEnv  = "CHROMAFS_IT_MOUNTNS"       // the test a child runs, in its namespace
	nsSetupEnv = "CHROMAFS_IT_MOUNTNS_SETUP" // what the child binds over (nsHelpers, nsNoAllowOther)
	nsBinEnv   = "CHROMAFS_IT_BINS"          // env.bin, env.raceBin, env.plainBin of the parent
)

// What a child's namespace changes.
const (
	nsHelpers      = "helpers"        // /sbin/mount.chromafs and mount.fuse.chromafs: the build under test
	nsNoAllowOther = "no-allow-other" // /etc/fuse.conf without user_allow_other
)

// withMountHelpers reports whether the calling test runs where
// /sbin/mount.chromafs and /sbin/mount.fuse.chromafs are the build under
// test (see inMountNS).
func withMountHelpers(t *testing.T) bool {
	t.Helper()
	return inMountNS(t, nsHelpers)
}

// inMountNS reports whether the calling test runs in a mount namespace
// changed as setup says. In the test binary's own process it runs the
// test in such a child, reports the child's result as its own, and
// returns false: the caller returns at once.
func inMountNS(t *testing.T, setup string) bool {
	t.Helper()
	if os.Getenv(nsTestEnv) == t.Name() {
		return true
	}
	requireRoot(t) // a mount namespace of its own
	self, err := os.Executable()
	must(t, err)
	args := []string{"-test.run", "^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v", "-test.count=1"}
	if deadline, ok := t.Deadline(); ok { // the child ends (and cleans up) before this run's -timeout
		args = append(args, "-test.timeout", time.Until(deadline).Round(time.Second).String())
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), nsTestEnv+"="+t.Name(), nsSetupEnv+"="+setup, "CHROMAFS_TEST_URL="+env.url,
		nsBinEnv+"="+strings.Join([]string{env.bin, env.raceBin, env.plainBin}, string(os.PathListSeparator)))
	// Go makes every mount of the new namespace private before the exec:
	// nothing mounted in it reaches the host
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := out.String()
	switch {
	case err != nil:
		t.Fatalf("in a mount namespace (%s): %v\n%s", setup, err, text)
	case strings.Contains(text, "--- SKIP: "+t.Name()):
		t.Logf("%s", text)
		t.Skip("SKIPPED in its mount namespace (output above)")
	case !strings.Contains(text, "--- PASS: "+t.Name()):
		t.Fatalf("in a mount namespace: no PASS line for %s:\n%s", t.Name(), text)
	}
	t.Logf("ran in a mount namespace (%s):\n%s", setup, text)
	return false
}

// runInMountNS is TestMain in such a child: the commands the parent built,
// the parent's server, and the namespace changed as nsSetupEnv says.
func runInMountNS(m *testing.M) int {
	bins := filepath.SplitList(os.Getenv(nsBinEnv))
	if len(bins) != 3 {
		fmt.Fprintf(os.Stderr, "%s: want three directories, got %q\n", nsBinEnv, os.Getenv(nsBinEnv))
		return 2
	}
	env.bin, env.raceBin, env.plainBin = bins[0], bins[1], bins[2]
	env.url = os.Getenv("CHROMAFS_TEST_URL")
	var undo func()
	var err error
	switch setup := os.Getenv(nsSetupEnv); setup {
	case nsHelpers:
		undo, err = helpersInSbin(filepath.Join(env.bin, "chromafs-mount"))
	case nsNoAllowOther:
		var conf, dev func()
		if conf, err = fuseConfWithout("user_allow_other"); err == nil {
			if dev, err = privateFuseDevice(); err != nil {
				conf()
			}
		}
		undo = func() { dev(); conf() }
	default:
		err = fmt.Errorf("unknown setup %q", setup)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "changing this test's mount namespace:", err)
		return 1
	}
	defer undo()
	return m.Run()
}

// fuseConfWithout binds, in this process's own mount namespace, a copy of
// /etc/fuse.conf without the lines naming option over it.
func fuseConfWithout(option string) (func(), error) {
	const conf = "/etc/fuse.conf"
	b, err := os.ReadFile(conf)
	if os.IsNotExist(err) {
		return func() {}, nil // fusermount3's defaults: no user_allow_other
	}
	if err != nil {
		return nil, err
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) != option {
			kept = append(kept, line)
		}
	}
	f, err := os.CreateTemp("", "chromafs-it-fuse.conf-")
	if err != nil {
		return nil, err
	}
	undo := func() { _ = unix.Unmount(conf, unix.MNT_DETACH); _ = os.Remove(f.Name()) }
	_, err = f.WriteString(strings.Join(kept, "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = unix.Mount(f.Name(), conf, "", unix.MS_BIND, "")
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("bind a copy over %s: %w", conf, err)
	}
	return undo, nil
}

// helpersInSbin binds, in this process's own mount namespace, a
// directory of links over /sbin: a link to each of the host's entries
// (reached through a read-only bind of the original) and mount.chromafs
// and mount.fuse.chromafs to bin. Undoing it removes only what it made:
// links, and directories that are empty once unmounted.
func helpersInSbin(bin string) (func(), error) {
	sbin, err := filepath.EvalSymlinks("/sbin")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "chromafs-it-sbin-")
	if err != nil {
		return nil, err
	}
	orig, links := filepath.Join(dir, "orig"), filepath.Join(dir, "sbin")
	var mounted []string
	undo := func() {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
		// never RemoveAll: were the bind of the host's /sbin still there,
		// it would remove the host's files
		if entries, err := os.ReadDir(links); err == nil {
			for _, e := range entries {
				if e.Type()&os.ModeSymlink != 0 {
					_ = os.Remove(filepath.Join(links, e.Name()))
				}
			}
		}
		for _, d := range []string{links, orig, dir} {
			_ = os.Remove(d) // empty directories only
		}
	}
	fail := func(err error) (func(), error) { undo(); return nil, err }
	for _, d := range []string{orig, links} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil { // other users in the namespace follow the links too
		return fail(err)
	}
	if err := unix.Mount(sbin, orig, "", unix.MS_BIND, ""); err != nil {
		return fail(fmt.Errorf("bind %s: %w", sbin, err))
	}
	mounted = append(mounted, orig)
	if err := unix.Mount("", orig, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		return fail(fmt.Errorf("make the bind of %s read-only: %w", sbin, err))
	}
	entries, err := os.ReadDir(orig)
	if err != nil {
		return fail(err)
	}
	for _, e := range entries {
		if e.Name() == "mount.chromafs" || e.Name() == "mount.fuse.chromafs" {
			continue
		}
		if err := os.Symlink(filepath.Join(orig, e.Name()), filepath.Join(links, e.Name())); err != nil {
			return fail(err)
		}
	}
	for _, name := range []string{"mount.chromafs", "mount.fuse.chromafs"} {
		if err := os.Symlink(bin, filepath.Join(links, name)); err != nil {
			return fail(err)
		}
	}
	if err := unix.Mount(links, sbin, "", unix.MS_BIND, ""); err != nil {
		return fail(fmt.Errorf("bind over %s: %w", sbin, err))
	}
	mounted = append(mounted, sbin)
	return undo, nil
}

// privateFuseDevice binds, in this process's own mount namespace, a
// /dev/fuse of its own (on a tmpfs of the namespace, mode 0600 as on a
// strict host) over the host's: a test may change its mode without
// changing the host's.
func privateFuseDevice() (func(), error) {
	dir, err := os.MkdirTemp("", "chromafs-it-dev-")
	if err != nil {
		return nil, err
	}
	var mounted []string
	undo := func() {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
		_ = os.Remove(dir) // empty once unmounted
	}
	fail := func(err error) (func(), error) { undo(); return nil, err }
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0755"); err != nil {
		return fail(fmt.Errorf("tmpfs for a device node: %w", err))
	}
	mounted = append(mounted, dir)
	node := filepath.Join(dir, "fuse")
	if err := unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(10, 229))); err != nil {
		return fail(fmt.Errorf("mknod %s: %w", node, err))
	}
	if err := unix.Chmod(node, 0o600); err != nil { // whatever the umask took
		return fail(err)
	}
	if err := unix.Mount(node, "/dev/fuse", "", unix.MS_BIND, ""); err != nil {
		return fail(fmt.Errorf("bind over /dev/fuse: %w", err))
	}
	mounted = append(mounted, "/dev/fuse")
	return undo, nil
}
