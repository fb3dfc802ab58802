package foreign

import "fmt"

// Known layouts (--layout).
var layouts = map[string]Layout{
	// LangChain's Chroma vector store: metadata "source"; Python's splitter
	// adds "start_index" (code points) with add_start_index=True; JS's adds
	// loc.lines, flattened to locFrom/locTo.
	"langchain": {Name: "langchain", PathKey: "source", OffsetKey: "start_index", Unit: CodePoints,
		OrderKey: "locFrom", LineFrom: "locFrom", LineTo: "locTo", Trims: true},
	// LlamaIndex's ChromaVectorStore: "file_path" from SimpleDirectoryReader
	// (else the document's id: ref_doc_id, doc_id, document_id), offsets
	// and neighbours in _node_content (JS units from LlamaIndex.TS, code
	// points from Python: the same for the BMP).
	// Its splitters trim the edges of nodes too (a file's final newline is
	// in no node).
	"llamaindex": {Name: "llamaindex", PathKey: "file_path", DocKeys: []string{"ref_doc_id", "doc_id", "document_id"},
		Node: true, Unit: UTF16, Trims: true},
}

// Named returns a known layout, or a custom one built from the keys.
func Named(name, pathKey, orderKey, offsetKey string) (Layout, error) {
	if name == "custom" {
		if pathKey == "" {
			return Layout{}, fmt.Errorf("--layout custom needs --path-key")
		}
		return Layout{Name: "custom", PathKey: pathKey, OrderKey: orderKey, OffsetKey: offsetKey, Unit: CodePoints}, nil
	}
	l, ok := layouts[name]
	if !ok {
		return Layout{}, fmt.Errorf("layout %q: want langchain, llamaindex or custom", name)
	}
	if pathKey != "" {
		l.PathKey = pathKey
	}
	if orderKey != "" {
		l.OrderKey = orderKey
	}
	if offsetKey != "" {
		l.OffsetKey = offsetKey
	}
	return l, nil
}

// Detect names the layout of a sample of records: LlamaIndex's
// _node_content, LangChain's source, or "" when it cannot tell.
func Detect(sample []Record) string {
	var llama, lc int
	for _, r := range sample {
		if _, ok := r.Meta["_node_content"]; ok {
			llama++
		}
		if _, ok := r.Meta["source"].(string); ok {
			lc++
		}
	}
	switch {
	case llama > 0 && llama >= lc:
		return "llamaindex"
	case lc > 0:
		return "langchain"
	}
	return ""
}

// JSClient reports whether the records were written by LangChain.js
// (locFrom present): its offsets, if any, count UTF-16 units.
func JSClient(sample []Record) bool {
	for _, r := range sample {
		if _, ok := r.Meta["locFrom"]; ok {
			return true
		}
	}
	return false
}
