package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestDaemonLinger: a view's shared mount outlives its last attachment
// (--linger): attached again, it is the same mount (the kernel's unique
// mount id of the daemon's mount, never reused), and a grep the last
// conversation ran answers from the kernel's caches, next to no read
// reaching the daemon (fromKernelCache) and no request to Chroma; it shows
// in chromafs list; a new mount past --max-mounts evicts it; and once the
// linger ends it is dropped, and the next attachment is a new mount whose
// reads reach the daemon again (the control of the first part).
func TestDaemonLinger(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 60, Seed: 71})
	const grep = "grep -rc chromafs . | sort"
	want := mustSh(t, src, grep)
	if want == "" {
		t.Fatal("the local grep printed nothing")
	}

	// viewOf is the status of the view with groups (none: the public
	// one), and its collection's requests to Chroma
	viewOf := func(d *daemonProc, groups ...string) (api.View, int64, bool) {
		t.Helper()
		st := d.status()
		for _, v := range st.Views {
			if strings.Join(v.Groups, ",") == strings.Join(groups, ",") && len(st.Collections) == 1 {
				return v, st.Collections[0].Requests, true
			}
		}
		return api.View{}, 0, false
	}
	attach := func(d *daemonProc, p string, args ...string) string {
		t.Helper()
		if out, code := d.run(0, append(append([]string{"attach", "--collection", name}, args...), p)...); code != 0 {
			t.Fatalf("attach %s: exit %d %s", p, code, out)
		}
		m, ok := proc.MountAt(p)
		if !ok || m.Device == "" {
			t.Fatalf("no mount at %s after attach", p)
		}
		return m.Device
	}
	detach := func(d *daemonProc, p string) {
		t.Helper()
		if out, code := d.run(0, "detach", p); code != 0 {
			t.Fatalf("detach %s: exit %d %s", p, code, out)
		}
	}

	// viewMount is the unique id (statx STATX_MNT_ID_UNIQUE, never reused
	// by the kernel, unlike a device number or mountinfo's id) of the one
	// mount in the daemon's directory, the view's
	viewMount := func(d *daemonProc) uint64 {
		t.Helper()
		mnts := leftMounts(filepath.Join(d.stateDir, "mnt"))
		if len(mnts) != 1 {
			t.Fatalf("mounts in the daemon's directory: %v, want the view's one", mnts)
		}
		var stx unix.Statx_t
		must(t, unix.Statx(unix.AT_FDCWD, mnts[0], unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE, &stx))
		if stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
			testenv.Missing(t, "the kernel gives no unique mount id (Linux 6.8+)")
		}
		return stx.Mnt_id
	}

	t.Run("kept warm and evicted", func(t *testing.T) {
		// --prefetch none: every request to Chroma is a read's, none in
		// the background after the grep
		d := startDaemon(t, "--linger", "10m", "--max-mounts", "3", "--prefetch", "none")
		first := d.dirFor(0, "conv-1")
		dev := attach(d, first)
		id := viewMount(d)
		if got := mustSh(t, first, grep); got != want {
			t.Fatalf("grep -r in the first conversation: %s", firstDiff(got, want))
		}
		detach(d, first)
		if _, ok := proc.MountAt(first); ok {
			t.Errorf("%s is still mounted after its detach", first)
		}
		v, requests, ok := viewOf(d)
		if !ok || v.Attachments != 0 || v.Lingering != 1 || v.LingerUntil == nil || time.Until(*v.LingerUntil) < 9*time.Minute {
			t.Fatalf("after the last detach: %+v (found %v), want the view lingering about 10 minutes", v, ok)
		}
		if out, _ := d.run(0, "list"); !strings.Contains(out, "1 until ") {
			t.Errorf("chromafs list does not show the lingering view:\n%s", out)
		}

		second := d.dirFor(0, "conv-2")
		if got := attach(d, second); got != dev || viewMount(d) != id {
			t.Errorf("attached again within the linger: device %s, mount %d; want the lingering mount's %s, %d", got, viewMount(d), dev, id)
		}
		if got := mustSh(t, second, grep); got != want {
			t.Errorf("grep -r in the next conversation: %s", firstDiff(got, want))
		}
		after, requestsAfter, _ := viewOf(d)
		if !fromKernelCache(after.Reads-v.Reads, v.Reads) || requestsAfter != requests {
			t.Errorf("the next conversation's grep: reads reaching the daemon %d -> %d, requests to Chroma %d -> %d; want the reads to move by 1 or at most 5%% of the first grep's (the kernel's caches answer) and no request",
				v.Reads, after.Reads, requests, requestsAfter)
		}
		if after.Lingering != 0 || after.Attachments != 1 {
			t.Errorf("attached again: %d lingering, %d attachments; want 0 and 1", after.Lingering, after.Attachments)
		}

		// a private attachment's mount never lingers
		priv := d.dirFor(0, "private")
		attach(d, priv, "--private", "--groups", "p")
		detach(d, priv)
		if v, _, ok := viewOf(d, "p"); ok {
			t.Errorf("a private attachment's view after its detach: %+v, want it gone", v)
		}

		// --max-mounts 3: two views lingering (the public one first), and
		// a third attached, fill it; a fourth mount evicts the one
		// lingering longest, then the next one, instead of a refusal
		detach(d, second)
		z := d.dirFor(0, "group-z")
		attach(d, z, "--groups", "z")
		detach(d, z)
		attach(d, d.dirFor(0, "group-a"), "--groups", "a")
		attach(d, d.dirFor(0, "group-b"), "--groups", "b")
		if v, _, ok := viewOf(d); ok {
			t.Errorf("the view lingering longest after a new mount past --max-mounts: %+v, want it evicted", v)
		}
		if v, _, ok := viewOf(d, "z"); !ok || v.Lingering != 1 {
			t.Errorf("the view lingering since later: %+v (found %v), want it still lingering", v, ok)
		}

		// a stop drops the lingering mount (z) and keeps the two attached
		// ones' (dead) for the next daemon
		mnts := filepath.Join(d.stateDir, "mnt")
		if n := len(leftMounts(mnts)); n != 3 {
			t.Fatalf("%d mounts in the daemon's directory before the stop, want 3 (2 attached, 1 lingering)", n)
		}
		d.kill(syscall.SIGTERM)
		if left := leftMounts(mnts); len(left) != 2 {
			t.Errorf("after SIGTERM: mounts %v in the daemon's directory, want the 2 attached ones' only", left)
		}
		d.start()
		placed := func(names ...string) func() bool {
			return func() bool {
				for _, n := range names {
					if !answers(filepath.Join(d.dir, n)) {
						return false
					}
				}
				return true
			}
		}
		waitFor(t, 10*time.Second, placed("group-a", "group-b"), func() string { return "the two attachments were not placed again" })

		// killed while a mount lingers: the next daemon places the
		// attachment left and sweeps the lingering mount, which nothing
		// records
		detach(d, filepath.Join(d.dir, "group-a"))
		if n := len(leftMounts(mnts)); n != 2 {
			t.Fatalf("%d mounts in the daemon's directory before the kill, want 2 (1 attached, 1 lingering)", n)
		}
		d.kill(syscall.SIGKILL)
		d.start()
		waitFor(t, 10*time.Second, func() bool { return placed("group-b")() && len(leftMounts(mnts)) == 1 }, func() string {
			return fmt.Sprintf("after a kill and a new start: mounts %v in the daemon's directory, want the 1 attached", leftMounts(mnts))
		})
	})

	t.Run("counted against its subject", func(t *testing.T) {
		// a user allowed one FUSE mount: the mount its detach left
		// lingering gives way to its next view instead of a refusal
		policy := filepath.Join(parent, "policy.yaml")
		must(t, os.WriteFile(policy, []byte(fmt.Sprintf("- users: [65534]\n  collections: [%s]\n  groups: [team, other]\n  limits: {mounts: 1}\n", name)), 0o600))
		d := startDaemon(t, "--linger", "10m", "--policy", policy)
		run := func(args ...string) {
			t.Helper()
			if out, code := d.run(65534, args...); code != 0 {
				t.Fatalf("chromafs %v as 65534: exit %d %s", args, code, out)
			}
		}
		one, two := d.dirFor(65534, "one"), d.dirFor(65534, "two")
		run("attach", "--collection", name, "--groups", "team", one)
		run("detach", one)
		if v, _, ok := viewOf(d, "team"); !ok || v.Lingering != 1 {
			t.Fatalf("the user's view after its detach: %+v (found %v), want it lingering", v, ok)
		}
		run("attach", "--collection", name, "--groups", "other", two)
		if v, _, ok := viewOf(d, "team"); ok {
			t.Errorf("the user's lingering view after its next view at its limit of 1 mount: %+v, want it evicted", v)
		}
		// the control: a mount attached, not lingering, still refuses
		if out, code := d.run(65534, "attach", "--collection", name, "--groups", "team", one); code == 0 || !strings.Contains(out, "limits.mounts") {
			t.Errorf("a second mount with one attached, at a limit of 1: exit %d %s, want a refusal naming limits.mounts", code, out)
		}
	})

	t.Run("dropped when the linger ends", func(t *testing.T) {
		d := startDaemon(t, "--linger", "1s", "--prefetch", "none")
		first := d.dirFor(0, "conv-1")
		attach(d, first)
		id := viewMount(d)
		mustSh(t, first, grep)
		detach(d, first)
		waitFor(t, 15*time.Second, func() bool { _, _, ok := viewOf(d); return !ok && len(leftMounts(d.stateDir)) == 0 },
			func() string {
				return fmt.Sprintf("the view or its mount outlived a 1s linger: %v", leftMounts(d.stateDir))
			})
		second := d.dirFor(0, "conv-2")
		attach(d, second)
		if got := viewMount(d); got == id {
			t.Errorf("attached after the linger ended: mount %d, the old one's", got)
		}
		if got := mustSh(t, second, grep); got != want {
			t.Errorf("grep -r after the linger ended: %s", firstDiff(got, want))
		}
		if v, _, _ := viewOf(d); v.Reads == 0 {
			t.Error("a new mount's grep made no read reach the daemon: the first part's check could not fail")
		}
		if b, err := os.ReadFile(filepath.Clean(d.logFile)); err != nil || !strings.Contains(string(b), "lingering mount dropped") {
			t.Errorf("the daemon's log does not say the lingering mount was dropped (%v)", err)
		}
	})
}
