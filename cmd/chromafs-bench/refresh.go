package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// benchRefresh measures live refresh on a mount of the corpus: a poll
// that finds the tree unchanged (SIGHUP until the daemon counted the
// poll), and a refresh after a re-ingest that changed 1% of the pages
// (SIGHUP until the new version is swapped in), next to what a remount
// costs. It edits the source, so it runs last.
func benchRefresh(c *config, r *report, label, coll, dir, src string) error {
	logf("%s: live refresh", label)
	d, ready, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-refresh"), "--refresh", "0", "--prefetch", "none")
	if err != nil {
		return err
	}
	defer d.unmount()
	var polls []time.Duration
	reqs := d.requests()
	for i := 0; i < c.reps; i++ {
		took, err := sighupUntil(d, "chromafs_tree_polls_total")
		if err != nil {
			return err
		}
		polls = append(polls, took)
	}
	perPoll := float64(d.requests()-reqs) / float64(c.reps)
	r.value(label, "live refresh: a poll that finds the tree unchanged (SIGHUP until counted)",
		fmt.Sprintf("%s, %.0f request(s), 0 invalidations", dur(median(polls)), perPoll), pass(perPoll == 1, "1 small request"))

	pages, err := sourcePages(src)
	if err != nil {
		return err
	}
	sort.Strings(pages)
	changed := max(len(pages)/100, 1)
	for i := 0; i < changed; i++ {
		p := filepath.Join(src, pages[(i*7919)%len(pages)])
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("\nedited for the refresh figure\n")
		f.Close()
		if err != nil {
			return err
		}
	}
	if _, err := ingest(c, coll, src); err != nil {
		return err
	}
	inval := d.metric("chromafs_tree_invalidations_total")
	took, err := sighupUntil(d, "chromafs_tree_refreshes_total")
	if err != nil {
		return err
	}
	r.ratio(label, fmt.Sprintf("live refresh after a re-ingest that changed %d pages (1%%; SIGHUP until swapped in, %d invalidations)",
		changed, d.metric("chromafs_tree_invalidations_total")-inval), took, "a new mount (mount-ready)", ready, maxRatio(1))
	return nil
}

// sighupUntil sends SIGHUP to the daemon and waits until counter grows.
func sighupUntil(d *daemon, counter string) (time.Duration, error) {
	before := d.metric(counter)
	start := time.Now()
	if err := syscall.Kill(d.pid, syscall.SIGHUP); err != nil {
		return 0, err
	}
	for d.metric(counter) == before {
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("%s did not grow within a minute of SIGHUP", counter)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), nil
}
