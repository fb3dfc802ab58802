package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

// benchBinary measures what a binary page costs next to a text page of
// the same size, both ingested with the default chunk size: the bytes
// Chroma stores for it (documents; base64 makes a binary page's 4/3 of
// its size) and the cold sequential read through the mount.
func benchBinary(c *config, r *report) error {
	ctx := context.Background()
	size := int64(c.binaryMiB) << 20
	src := filepath.Join(c.work, "binary", "src")
	if _, err := corpus.Generate(src, corpus.Spec{Large: []int64{size}, Seed: 7}); err != nil {
		return err
	}
	img := make([]byte, size)
	for i := range img {
		img[i] = byte(i*131 + i/7 + 0x80)
	}
	if err := os.WriteFile(filepath.Join(src, "large", "image.png"), img, 0o644); err != nil {
		return err
	}
	coll := fmt.Sprintf("bench-binary-%d", time.Now().Unix())
	if _, err := ingest(c, coll, src); err != nil {
		return err
	}
	rw, err := mustRaw(ctx, c, coll)
	if err != nil {
		return err
	}
	defer rw.close()
	label := fmt.Sprintf("%d MiB page", c.binaryMiB)
	speed := map[string]float64{}
	for _, p := range []struct{ name, slug, file string }{{"text", "large/big-0", "large/big-0.md"}, {"binary", "large/image", "large/image.png"}} {
		stored, _, err := rw.page(ctx, p.slug)
		if err != nil {
			return err
		}
		r.value(label, p.name+": bytes stored / file size", fmt.Sprintf("%.3f (%s documents)", float64(stored)/float64(size), mib(stored)), "—")
		d, err := coldRead(c, coll, filepath.Join(c.work, "binary", "mnt"), p.file)
		if err != nil {
			return err
		}
		speed[p.name] = float64(c.binaryMiB) / d.Seconds()
	}
	ratio := speed["binary"] / speed["text"]
	r.value(label, "binary vs text page, sequential read, cold (MiB/s)",
		fmt.Sprintf("%.1f vs %.1f = %.2fx", speed["binary"], speed["text"], ratio), pass(ratio >= 0.6, "≥ 0.6x a text page"))
	return nil
}

// coldRead is the median time to read file whole from a fresh mount
// (empty caches, no prefetch).
func coldRead(c *config, coll, mnt, file string) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < c.reps; i++ {
		d, _, err := mountDaemon(c, coll, mnt, "--prefetch", "none")
		if err != nil {
			return 0, err
		}
		start := time.Now()
		err = readAll(filepath.Join(d.dir, file))
		ds = append(ds, time.Since(start))
		d.unmount()
		if err != nil {
			return 0, err
		}
	}
	return median(ds), nil
}
