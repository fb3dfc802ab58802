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
// that finds the tree unchanged (SIGHUP until the daemon's check of the
// tree's stamp is answered), and a refresh after a re-ingest that changed 1% of the pages
// (SIGHUP until the new version is swapped in), next to what a new mount
// of that version costs; each --reps times, medians on both sides. It
// edits the source, so it runs last.
func benchRefresh(c *config, r *report, label, coll, dir, src string) error {
	logf("%s: live refresh", label)
	flags := []string{"--refresh", "0", "--prefetch", "none"}
	d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-refresh"), flags...)
	if err != nil {
		return err
	}
	defer d.unmount()
	var polls []time.Duration
	var pollReqs, pollInval []int64
	for i := 0; i < c.reps; i++ {
		reqs, inval := d.requests(), d.metric("chromafs_tree_invalidations_total")
		// done once the stamp's check is answered (polls_total counts it
		// when it is asked)
		took, err := sighupUntil(d, "chromafs_tree_last_poll_timestamp_seconds")
		if err != nil {
			return err
		}
		polls = append(polls, took)
		pollReqs = append(pollReqs, d.requests()-reqs)
		pollInval = append(pollInval, d.metric("chromafs_tree_invalidations_total")-inval)
	}
	r.value(label, "live refresh: a poll that finds the tree unchanged (SIGHUP until its check is answered)",
		fmt.Sprintf("%s, %s, %s", dur(median(polls)), countOf(pollReqs, "request"), countOf(pollInval, "invalidation")),
		pass(allAre(pollReqs, 1) && allAre(pollInval, 0), "1 small request, 0 invalidations"))

	pages, err := sourcePages(src, false)
	if err != nil {
		return err
	}
	sort.Strings(pages)
	changed := max(len(pages)/100, 1)
	var refreshes, remounts []time.Duration
	var inval []int64
	for rep := 0; rep < c.reps; rep++ {
		if err := editPages(src, pages, changed, rep); err != nil {
			return err
		}
		if _, err := ingest(c, coll, src); err != nil {
			return err
		}
		before := d.metric("chromafs_tree_invalidations_total")
		took, err := sighupUntil(d, "chromafs_tree_refreshes_total")
		if err != nil {
			return err
		}
		refreshes = append(refreshes, took)
		inval = append(inval, d.metric("chromafs_tree_invalidations_total")-before)
		// what the refresh left to do in the background (the host tier's
		// copy of the new tree) is done before the new mount is timed
		d.settledRSS()
		nd, ready, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-refresh-new"), flags...)
		if err != nil {
			return err
		}
		nd.unmount()
		remounts = append(remounts, ready)
	}
	r.ratio(label, fmt.Sprintf("live refresh after a re-ingest that changed %d pages (1%%; SIGHUP until swapped in; %s)",
		changed, countOf(inval, "invalidation")), median(refreshes), "a new mount of that version (mount-ready)", median(remounts), maxRatio(1))
	return nil
}

// editPages appends a line to changed of the pages of src, a different
// choice for each repetition rep.
func editPages(src string, pages []string, changed, rep int) error {
	for i := 0; i < changed; i++ {
		p := filepath.Join(src, pages[(i*7919+rep*104729)%len(pages)])
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "\nedited for the refresh figure (%d)\n", rep)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// sighupUntil sends SIGHUP to the daemon and waits until its metric name
// (a sample without labels) changes.
func sighupUntil(d *daemon, name string) (time.Duration, error) {
	value := func() (float64, error) {
		m, err := scrape(d.Metrics)
		if err != nil {
			return 0, err
		}
		v, ok := m[name]
		if !ok {
			return 0, fmt.Errorf("the mount's metrics have no %s", name)
		}
		return v, nil
	}
	before, err := value()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := syscall.Kill(d.pid, syscall.SIGHUP); err != nil {
		return 0, err
	}
	for {
		v, err := value()
		if err != nil {
			return 0, err
		}
		if v != before {
			return time.Since(start), nil
		}
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("%s did not change within a minute of SIGHUP", name)
		}
		time.Sleep(time.Millisecond)
	}
}
