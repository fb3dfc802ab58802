package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// benchAccessLog measures what --access-log costs: a cold grep -r with
// every read reaching the daemon (no prefetch, no pushes: the most lines
// a session can write), with and without the log, alternating mounts.
func benchAccessLog(c *config, r *report, label, coll, dir string) error {
	logf("%s: cold grep -r with and without --access-log", label)
	var with, without []time.Duration
	var lines []int64
	for i := 0; i < c.reps; i++ {
		for _, logged := range []bool{false, true} {
			args := []string{"--prefetch", "none", "--push-pages=false"}
			logPath := filepath.Join(dir, fmt.Sprintf("access-%d.jsonl", i))
			if logged {
				args = append(args, "--access-log", logPath)
			}
			d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-access"), args...)
			if err != nil {
				return err
			}
			start := time.Now()
			err = shell(d.dir, grepScript)
			took := time.Since(start)
			d.unmount()
			if err != nil {
				return err
			}
			if !logged {
				without = append(without, took)
				continue
			}
			with = append(with, took)
			b, err := os.ReadFile(logPath)
			if err != nil {
				return err
			}
			lines = append(lines, int64(strings.Count(string(b), "\n")))
		}
	}
	r.ratio(label, fmt.Sprintf("cold `%s`, --access-log on (%s)", grepCmd, countOf(lines, "line")), median(with), "off", median(without), maxRatio(1.1))
	return nil
}
