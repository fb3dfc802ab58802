package mountcmd

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Invoked as mount.chromafs or mount.fuse.chromafs (links to this binary,
// scripts/install.sh makes them), chromafs-mount speaks mount(8)'s helper
// convention:
//
//	mount.chromafs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS] [-t TYPE]
//
// SOURCE is the collection, best written chromafs:COLLECTION: mount(8)
// canonicalises a source that names a file in its working directory
// (a bare "docs" becomes "/home/me/docs" when run where a docs/ folder
// is), and leaves chromafs:docs alone, as it leaves sshfs's user@host:.
// The source as given is the mount's source in /proc/self/mountinfo
// (--fsname), so mount -a sees that an fstab entry is mounted and skips
// it. A bare name still works where no such file is; a source that is a
// path is refused with that advice (a collection name has no "/").
// OPTIONS are the long flags with _ for -
// (chroma_url=, groups=, cache_size=, token_file=, ...). The generic
// options mount(8) and fstab add are accepted and ignored (the mount is
// always ro, nosuid, nodev), and it daemonizes unless told "foreground",
// because mount(8) waits for its helper. So an fstab line
//
//	chromafs:docs /mnt/docs chromafs _netdev,chroma_url=http://chroma.internal:8000,groups=support 0 0
//
// or "mount -t chromafs chromafs:docs /mnt/docs -o chroma_url=..." mounts it.

// helperNames are the names mount(8) runs a helper by.
var helperNames = map[string]bool{"mount.chromafs": true, "mount.fuse.chromafs": true, "mount.fuse3.chromafs": true}

// isHelper reports whether argv0 names the mount helper.
func isHelper(argv0 string) bool { return helperNames[filepath.Base(argv0)] }

// genericOptions are mount(8)'s and fstab's own options: they mean nothing
// to chromafs, or what it always does.
var genericOptions = map[string]bool{
	"rw": true, "ro": true, "dev": true, "nodev": true, "suid": true, "nosuid": true, "exec": true, "noexec": true,
	"auto": true, "noauto": true, "user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"_netdev": true, "nofail": true, "defaults": true, "sync": true, "async": true, "atime": true, "noatime": true,
	"relatime": true, "strictatime": true, "diratime": true, "nodiratime": true, "lazytime": true, "nolazytime": true,
	"mand": true, "nomand": true, "silent": true, "loud": true, "iversion": true, "noiversion": true,
}

// helperArgs turns mount(8)'s arguments into chromafs-mount's own, and
// reports a fake mount (-f: do everything but mount).
func helperArgs(args []string) (out []string, fake bool, err error) {
	var pos, opts []string
	daemon := true
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" && i+1 < len(args):
			i++
			for _, o := range strings.Split(args[i], ",") {
				switch key, _, _ := strings.Cut(o, "="); {
				case o == "" || genericOptions[o] || strings.HasPrefix(o, "x-") || key == "comment":
				case o == "foreground":
					daemon = false
				default:
					opts = append(opts, o)
				}
			}
		case (a == "-t" || a == "-N") && i+1 < len(args):
			i++ // the type (chromafs, fuse.chromafs) or a namespace: nothing to do
		case a == "-f":
			fake = true
		case a == "-s" || a == "-n" || a == "-v" || a == "-r" || a == "-w":
		case strings.HasPrefix(a, "-"):
			return nil, false, fmt.Errorf("mount helper: unknown option %s (usage: mount.chromafs COLLECTION MOUNTPOINT [-o OPTIONS])", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, false, fmt.Errorf("mount helper: want COLLECTION MOUNTPOINT, got %d arguments", len(pos))
	}
	name, err := sourceCollection(pos[0])
	if err != nil {
		return nil, false, err
	}
	if name != "" {
		out = append(out, "--collection", name)
	}
	if pos[0] != "" && (name == "" || pos[0] != SourcePrefix+name) {
		// the source as fstab has it, so that mount -a finds the entry
		// mounted (it compares fstab's source with mountinfo's)
		out = append(out, "--fsname", pos[0])
	}
	if daemon {
		out = append(out, "--daemon")
	}
	if len(opts) > 0 {
		out = append(out, "-o", strings.Join(opts, ","))
	}
	return append(out, pos[1]), fake, nil
}

// SourcePrefix starts the unambiguous form of a mount source,
// chromafs:COLLECTION: mount(8) leaves it as it is, and it is the
// fsname the mount shows in /proc/self/mountinfo.
const SourcePrefix = "chromafs:"

// sourceCollection reads mount(8)'s SOURCE: chromafs:COLLECTION or a bare
// COLLECTION; "", "none" and "chromafs:" leave the collection to -o.
func sourceCollection(src string) (string, error) {
	name := strings.TrimPrefix(src, SourcePrefix)
	if name == "none" && name == src {
		return "", nil
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("mount helper: source %q is a path, not a collection: mount(8) makes a source a path when a file of that name is in its working directory; write the source as %s%s", src, SourcePrefix, filepath.Base(name))
	}
	return name, nil
}
