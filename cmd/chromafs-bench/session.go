package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chromafs/chromafs/internal/harness"
)

// agentSession is what a docs assistant's agent does in one conversation:
// 34 commands of the kinds such agents run (ls, find, grep -rn/-rli/-rc,
// rg, cat, head, sed, wc, du, md5sum), in order, on pages picked
// deterministically from the corpus. Listings that depend on directory
// order (ext4 hashes it, the mount sorts it) are sorted, and nothing shows
// owners, modes or sub-second times, so the output compares byte for byte.
func agentSession(pages []string) []string {
	page := func(i int) string { return pages[(i*7919)%len(pages)] }
	p := func(i int) string { return shellWord(page(i)) }
	d := func(i int) string { return shellWord(filepath.Dir(page(i))) }
	return []string{
		"ls", "ls " + d(1), "find . -maxdepth 2 -type d | sort",
		"find . -name '*.md' | wc -l", "grep -rn 'chromafs' " + d(2) + " | sort | head -50",
		"cat " + p(3), "head -40 " + p(4), "grep -rli 'mount' . | sort | head -100",
		"sed -n '10,30p' " + p(5), "wc -l " + p(6) + " " + p(7), "rg -n 'cache' " + d(8) + " | sort | head -50",
		"cat " + p(9) + " | grep -c '^#'", "grep -rc 'the' " + d(10) + " | sort", "du -sh " + d(11),
		"md5sum " + p(12), "find " + d(13) + " -type f | sort", "head -c 2000 " + p(14),
		"grep -rn 'FUSE' . | wc -l", "cat " + p(15), "rg -l 'chroma' | sort | head -100",
		"tail -20 " + p(16), "grep -n 'section' " + p(17), "ls -lR " + d(18) + " | wc -l",
		"wc -c " + p(19), "sed -n '1,5p' " + p(20), "grep -rn 'config' " + d(21) + " | sort | head -20",
		"cat " + p(22) + " " + p(23) + " | wc -w", "find . -type f | wc -l", "md5sum " + p(24) + " " + p(25),
		"grep -rli 'index' " + d(26) + " | sort", "head -100 " + p(27), "du -sb .",
		"grep -rc 'chromafs' . | sort | tail -20", "cat " + p(28),
	}
}

// shellWord is s as one word of a bash command: as it is when it holds
// only letters, digits and ._/+-, else single-quoted (a real repository's
// names, --corpus, may hold spaces or worse).
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sessionResult is the time an agent waited and everything it saw.
type sessionResult struct {
	waited time.Duration
	each   []time.Duration // per command
	output string
}

// runSession runs the commands in order in dir with think time between
// them; only the commands' own time counts as waiting.
func runSession(dir string, cmds []string, think time.Duration) (sessionResult, error) {
	var res sessionResult
	var out strings.Builder
	for i, c := range cmds {
		if i > 0 {
			time.Sleep(think)
		}
		cmd := exec.Command("bash", "-c", c) // as an agent runs it: no pipefail, so head ending a pipe is no error
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		start := time.Now()
		err := cmd.Run()
		res.each = append(res.each, time.Since(start))
		res.waited += res.each[i]
		fmt.Fprintf(&out, "$ %s (%v)\n%s", c, err == nil, b.String())
	}
	res.output = out.String()
	return res, nil
}

// sourcePages lists the corpus's pages, sorted: a generated corpus's
// (harness.Pages), or a real one's (docs, --corpus) .md and .mdx files.
func sourcePages(src string, docs bool) ([]string, error) {
	if !docs {
		return harness.Pages(src)
	}
	files, err := harness.Files(src)
	var pages []string
	for _, f := range files {
		if ext := filepath.Ext(f); ext == ".md" || ext == ".mdx" {
			pages = append(pages, f)
		}
	}
	return pages, err
}

// benchSession measures an agent's session on the mount, in a first
// conversation (cold host) and the next one (a new mount process on the
// same host), against the same session on a local copy; and what the next
// conversation's mount pulled from Chroma and took to be ready. Each of
// --reps repetitions runs the three sessions back to back (a fresh host
// cache for the first conversation); medians are reported.
func benchSession(c *config, r *report, label, coll, dir, src string, corpusBytes int64) error {
	logf("%s: agent session", label)
	pages, err := sourcePages(src, c.corpus != "")
	if err != nil || len(pages) == 0 {
		return fmt.Errorf("session pages: %v (%d)", err, len(pages))
	}
	cmds := agentSession(pages)
	think := 300 * time.Millisecond
	if c.smoke {
		think = 50 * time.Millisecond
	}
	if _, err := runSession(src, cmds, 0); err != nil { // warm the local page cache
		return err
	}
	var reps []sessionRep
	for i := 0; i < c.reps; i++ {
		rep, err := sessionOnce(c, label, coll, dir, src, cmds, think)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	med := func(get func(sessionRep) time.Duration) time.Duration { return medianOf(reps, get) }
	last := reps[len(reps)-1]
	for i, run := range last.runs {
		logSlowest(fmt.Sprintf("conversation %d", i+1), cmds, run, last.local)
	}
	n := len(cmds)
	local := med(func(s sessionRep) time.Duration { return s.local.waited })
	r.ratio(label, fmt.Sprintf("agent session (%d commands), first conversation: time waited", n), med(func(s sessionRep) time.Duration { return s.runs[0].waited }), "same on the local copy", local, maxRatio(1.5))
	r.ratio(label, fmt.Sprintf("agent session (%d commands), next conversation (new mount process, same host): time waited", n), med(func(s sessionRep) time.Duration { return s.runs[1].waited }), "same on the local copy", local, maxRatio(1.2))
	pulled := func(i int) float64 {
		return 100 * float64(medianOfInt(reps, func(s sessionRep) int64 { return s.pulled[i] })) / float64(corpusBytes)
	}
	pct := pulled(1)
	r.value(label, fmt.Sprintf("bytes the next conversation pulled from Chroma (median of %d)", len(reps)), fmt.Sprintf("%.1f%% of the corpus (first: %.0f%%)", pct, pulled(0)), pass(pct <= 5, "≤ 5%"))
	var startReqs []int64
	for _, s := range reps {
		startReqs = append(startReqs, s.startReqs[1])
	}
	r.ratio(label, fmt.Sprintf("restart: mount-ready from the host cache (%s waited for)", countOf(startReqs, "request")),
		med(func(s sessionRep) time.Duration { return s.ready[1] }), "cold mount-ready", med(func(s sessionRep) time.Duration { return s.ready[0] }), restartTarget(startReqs))
	return nil
}

// sessionRep is one repetition: the local session, then the first and the
// next conversation on mounts.
type sessionRep struct {
	local             sessionResult
	runs              [2]sessionResult
	ready             [2]time.Duration
	pulled, startReqs [2]int64
}

func sessionOnce(c *config, label, coll, dir, src string, cmds []string, think time.Duration) (sessionRep, error) {
	var rep sessionRep
	var err error
	if rep.local, err = runSession(src, cmds, think); err != nil {
		return rep, err
	}
	cacheDir, err := os.MkdirTemp(c.work, "host-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(cacheDir)
	for i := range rep.runs {
		flags := append([]string{"--cache-dir", cacheDir}, c.session...)
		if !slices.Contains(flags, "--prefetch") {
			flags = append(flags, "--prefetch", "auto") // the default
		}
		d, rd, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-session"), flags...)
		if err != nil {
			return rep, err
		}
		rep.ready[i], rep.startReqs[i] = rd, d.metric("chromafs_mount_chroma_requests") // waited for: a warm mount's check comes after
		rep.runs[i], err = runSession(d.dir, cmds, think)
		rep.pulled[i] = d.metric("chromafs_fetched_bytes_total")
		d.unmount()
		if err != nil {
			return rep, err
		}
		if rep.runs[i].output != rep.local.output {
			return rep, fmt.Errorf("%s: the session's output on the mount differs from the local copy's (conversation %d): %s",
				label, i+1, firstDifference(rep.runs[i].output, rep.local.output))
		}
	}
	return rep, nil
}

// restartTarget judges the restart: the median within 50 ms, and no
// request waited for in any repetition (the check comes after).
func restartTarget(reqs []int64) target {
	return func(_ float64, v time.Duration) string {
		return pass(v <= 50*time.Millisecond && allAre(reqs, 0), "≤ 50 ms, no request")
	}
}

// firstDifference shows where two outputs part.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: mount %q, local %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(g), len(w))
}

// logSlowest logs the commands that cost the most over the local copy.
func logSlowest(what string, cmds []string, run, local sessionResult) {
	idx := make([]int, len(cmds))
	for i := range idx {
		idx[i] = i
	}
	extra := func(i int) time.Duration { return run.each[i] - local.each[i] }
	sort.Slice(idx, func(a, b int) bool { return extra(idx[a]) > extra(idx[b]) })
	for _, i := range idx[:min(5, len(idx))] {
		logf("  %s: +%s %q (%s vs %s local)", what, dur(extra(i)), cmds[i], dur(run.each[i]), dur(local.each[i]))
	}
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
