package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes the daemon's metrics: per collection and per view,
// never per attachment (an attachment is a conversation: too many label
// values), read from a fresh status at every scrape.
func (d *Daemon) Collector() prometheus.Collector { return collector{d} }

type collector struct{ d *Daemon }

var (
	viewLabels = []string{"view", "collection"}
	descs      = struct {
		viewReads, viewBytes, viewErrors, viewAttachments, viewFiles         *prometheus.Desc
		viewLingering                                                        *prometheus.Desc
		viewSearches, viewSearchFailures, viewSearchIndex                    *prometheus.Desc
		colRequests, colPolls, colCacheBytes, colPages, colViews, colFetched *prometheus.Desc
		attachments, mounts                                                  *prometheus.Desc
		attaches, attachRequests, attachRoundTrips                           *prometheus.Desc
		colMemory, colEvictions                                              *prometheus.Desc
		memBudget, memPages, memTrees, memOverhead, memPageEvictions         *prometheus.Desc
		memViewEvictions, memReloads                                         *prometheus.Desc
	}{
		viewReads:          prometheus.NewDesc("chromafs_view_reads_total", "Reads that reached the daemon, by view.", viewLabels, nil),
		viewBytes:          prometheus.NewDesc("chromafs_view_read_bytes_total", "Bytes read through the daemon, by view.", viewLabels, nil),
		viewErrors:         prometheus.NewDesc("chromafs_view_read_errors_total", "Reads that failed (EIO), by view.", viewLabels, nil),
		viewAttachments:    prometheus.NewDesc("chromafs_view_attachments", "Attachments of the view.", viewLabels, nil),
		viewLingering:      prometheus.NewDesc("chromafs_view_lingering_mounts", "Mounts of the view kept warm without an attachment (--linger).", viewLabels, nil),
		viewFiles:          prometheus.NewDesc("chromafs_view_files", "Files in the view's tree.", viewLabels, nil),
		viewSearches:       prometheus.NewDesc("chromafs_view_searches_total", "Searches run (.search/, .similar/; not those answered from the results kept), by view.", viewLabels, nil),
		viewSearchFailures: prometheus.NewDesc("chromafs_view_search_failures_total", "Searches that failed (EIO; the reason is logged), by view.", viewLabels, nil),
		viewSearchIndex:    prometheus.NewDesc("chromafs_view_search_index_memory_bytes", "Heap the view's lexical index holds (estimate).", viewLabels, nil),
		colRequests:        prometheus.NewDesc("chromafs_collection_requests_total", "HTTP requests sent to Chroma for the collection.", []string{"collection"}, nil),
		colPolls:           prometheus.NewDesc("chromafs_collection_polls_total", "Checks of the collection's tree stamp (--refresh), one for all its views.", []string{"collection"}, nil),
		colCacheBytes:      prometheus.NewDesc("chromafs_collection_cache_bytes", "Bytes in the collection's memory cache.", []string{"collection"}, nil),
		colPages:           prometheus.NewDesc("chromafs_collection_cache_entries", "Chunks in the collection's memory cache.", []string{"collection"}, nil),
		colViews:           prometheus.NewDesc("chromafs_collection_views", "Views of the collection.", []string{"collection"}, nil),
		colFetched:         prometheus.NewDesc("chromafs_collection_fetched_bytes_total", "Content bytes that came from the source (Chroma, lazy pointers' URIs), not a tier.", []string{"collection"}, nil),
		colMemory:          prometheus.NewDesc("chromafs_collection_memory_bytes", "What the collection holds besides its pages (decoded tree, views' trees, search indexes; estimates), counted against --memory.", []string{"collection"}, nil),
		colEvictions:       prometheus.NewDesc("chromafs_collection_cache_evictions_total", "Chunks of the collection evicted from memory (by the budget, or its --cache-size).", []string{"collection"}, nil),
		memBudget:          prometheus.NewDesc("chromafs_memory_budget_bytes", "The host's memory budget (--memory): pages, trees, views and search indexes of every collection, and the heap's overhead.", nil, nil),
		memPages:           prometheus.NewDesc("chromafs_memory_pages_bytes", "Bytes of pages cached in memory, every collection.", nil, nil),
		memTrees:           prometheus.NewDesc("chromafs_memory_trees_bytes", "What the collections hold besides pages (trees, views, search indexes; estimates).", nil, nil),
		memOverhead:        prometheus.NewDesc("chromafs_memory_overhead_bytes", "What the heap holds beyond pages, trees, the daemon serving nothing and a fixed 16 MiB, measured after garbage collections, counted against --memory.", nil, nil),
		memPageEvictions:   prometheus.NewDesc("chromafs_memory_page_evictions_total", "Chunks evicted from memory (by the budget, or a collection's --cache-size), every collection.", nil, nil),
		memViewEvictions:   prometheus.NewDesc("chromafs_memory_view_evictions_total", "Idle views (lingering mounts) dropped for the memory budget.", nil, nil),
		memReloads:         prometheus.NewDesc("chromafs_memory_reloads_total", "Views dropped for the memory budget, then attached and loaded again.", nil, nil),
		attachments:        prometheus.NewDesc("chromafs_attachments", "Attachments the daemon serves.", nil, nil),
		mounts:             prometheus.NewDesc("chromafs_mounts", "FUSE mounts the daemon serves.", nil, nil),
		attaches:           prometheus.NewDesc("chromafs_attaches_total", "Attaches placed.", nil, nil),
		attachRequests:     prometheus.NewDesc("chromafs_attach_chroma_requests_total", "Requests to Chroma the attaches placed waited for.", nil, nil),
		attachRoundTrips:   prometheus.NewDesc("chromafs_attach_chroma_round_trips_total", "Round trips to Chroma the attaches placed waited for, one after another (requests sent at once count once).", nil, nil),
	}
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descs.viewReads, descs.viewBytes, descs.viewErrors, descs.viewAttachments, descs.viewLingering, descs.viewFiles,
		descs.viewSearches, descs.viewSearchFailures, descs.viewSearchIndex,
		descs.colRequests, descs.colPolls, descs.colCacheBytes, descs.colPages, descs.colViews, descs.colFetched, descs.attachments, descs.mounts,
		descs.attaches, descs.attachRequests, descs.attachRoundTrips,
		descs.colMemory, descs.colEvictions, descs.memBudget, descs.memPages, descs.memTrees, descs.memOverhead, descs.memPageEvictions, descs.memViewEvictions, descs.memReloads} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.Status(0)
	for _, v := range st.Views {
		ch <- prometheus.MustNewConstMetric(descs.viewReads, prometheus.CounterValue, float64(v.Reads), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewBytes, prometheus.CounterValue, float64(v.Bytes), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewErrors, prometheus.CounterValue, float64(v.Errors), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewAttachments, prometheus.GaugeValue, float64(v.Attachments), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewLingering, prometheus.GaugeValue, float64(v.Lingering), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewFiles, prometheus.GaugeValue, float64(v.Files), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewSearches, prometheus.CounterValue, float64(v.Searches), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewSearchFailures, prometheus.CounterValue, float64(v.SearchFailures), v.ID, v.Collection)
		ch <- prometheus.MustNewConstMetric(descs.viewSearchIndex, prometheus.GaugeValue, float64(v.SearchIndexBytes), v.ID, v.Collection)
	}
	for _, col := range st.Collections {
		ch <- prometheus.MustNewConstMetric(descs.colRequests, prometheus.CounterValue, float64(col.Requests), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colPolls, prometheus.CounterValue, float64(col.Polls), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colCacheBytes, prometheus.GaugeValue, float64(col.CacheBytes), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colPages, prometheus.GaugeValue, float64(col.PagesCached), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colViews, prometheus.GaugeValue, float64(col.Views), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colFetched, prometheus.CounterValue, float64(col.Fetched), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colMemory, prometheus.GaugeValue, float64(col.MemoryBytes), col.Name)
		ch <- prometheus.MustNewConstMetric(descs.colEvictions, prometheus.CounterValue, float64(col.PageEvictions), col.Name)
	}
	mem := st.Memory
	ch <- prometheus.MustNewConstMetric(descs.memBudget, prometheus.GaugeValue, float64(mem.Budget))
	ch <- prometheus.MustNewConstMetric(descs.memPages, prometheus.GaugeValue, float64(mem.Pages))
	ch <- prometheus.MustNewConstMetric(descs.memTrees, prometheus.GaugeValue, float64(mem.Trees))
	ch <- prometheus.MustNewConstMetric(descs.memOverhead, prometheus.GaugeValue, float64(mem.Overhead))
	ch <- prometheus.MustNewConstMetric(descs.memPageEvictions, prometheus.CounterValue, float64(mem.PageEvictions))
	ch <- prometheus.MustNewConstMetric(descs.memViewEvictions, prometheus.CounterValue, float64(mem.ViewEvictions))
	ch <- prometheus.MustNewConstMetric(descs.memReloads, prometheus.CounterValue, float64(mem.Reloads))
	ch <- prometheus.MustNewConstMetric(descs.attachments, prometheus.GaugeValue, float64(len(st.Attachments)))
	c.d.mu.Lock()
	mounts := c.d.mounts
	c.d.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descs.mounts, prometheus.GaugeValue, float64(mounts))
	ch <- prometheus.MustNewConstMetric(descs.attaches, prometheus.CounterValue, float64(c.d.attaches.Load()))
	ch <- prometheus.MustNewConstMetric(descs.attachRequests, prometheus.CounterValue, float64(c.d.attachRequests.Load()))
	ch <- prometheus.MustNewConstMetric(descs.attachRoundTrips, prometheus.CounterValue, float64(c.d.attachRoundTrips.Load()))
}
