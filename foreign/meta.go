package foreign

import (
	"cmp"
	"encoding/json"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// stringMeta reads a string metadata value.
func stringMeta(m map[string]any, key string) (string, bool) {
	if key == "" {
		return "", false
	}
	s, ok := m[key].(string)
	return s, ok
}

// numberMeta reads a number, or a decimal string, metadata value.
func numberMeta(m map[string]any, key string) (float64, bool) {
	if key == "" {
		return 0, false
	}
	switch v := m[key].(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

// groupsMeta reads access groups: a list of strings, or a comma-separated
// string. Anything else is malformed (ok false: the file is hidden).
func groupsMeta(m map[string]any, key string) ([]string, bool) {
	switch v := m[key].(type) {
	case nil:
		return nil, true
	case string:
		var out []string
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				out = append(out, g)
			}
		}
		return out, true
	case []any:
		out := make([]string, 0, len(v))
		for _, g := range v {
			s, ok := g.(string)
			if !ok || s == "" {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case []string:
		return v, true
	}
	return nil, false
}

// nodeContent is what LlamaIndex keeps of a node in _node_content.
type nodeContent struct {
	ID    string   `json:"id_"`
	Start *float64 `json:"start_char_idx"`
	// TS writes camelCase in some versions
	StartTS *float64 `json:"startCharIdx"`
	// Relationships name the node's neighbours in its document: PREVIOUS
	// and NEXT in LlamaIndex.TS, "2" and "3" in Python.
	Relationships map[string]relatedNode `json:"relationships"`
}

type relatedNode struct {
	ID   string `json:"node_id"`
	IDTS string `json:"nodeId"`
}

func (n nodeContent) neighbour(names ...string) string {
	for _, name := range names {
		if r, ok := n.Relationships[name]; ok {
			return cmp.Or(r.ID, r.IDTS)
		}
	}
	return ""
}

// nodeMeta takes a LlamaIndex chunk's start offset and neighbours from
// _node_content.
func nodeMeta(c *chunk, r *Record) {
	raw, ok := r.Meta["_node_content"].(string)
	if !ok {
		return
	}
	var n nodeContent
	if json.Unmarshal([]byte(raw), &n) != nil {
		return
	}
	switch {
	case n.Start != nil && *n.Start >= 0:
		c.offset = int64(*n.Start)
	case n.StartTS != nil && *n.StartTS >= 0:
		c.offset = int64(*n.StartTS)
	}
	c.node = cmp.Or(n.ID, r.ID)
	c.prev, c.next = n.neighbour("PREVIOUS", "2"), n.neighbour("NEXT", "3")
}

// displayPaths maps each source (a path or a URL) to a path below the
// mount root: URLs to host/path (a trailing "/" becomes index), paths
// relative to the directory all of them share; components a file system
// cannot hold ("", ".", "..", over 255 bytes) are escaped reversibly
// (percent-encoding, as in a URL).
func displayPaths(sources []string) map[string]string {
	out := make(map[string]string, len(sources))
	var local []string
	for _, s := range sources {
		if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
			p := u.Path
			if p == "" || strings.HasSuffix(p, "/") {
				p += "index"
			}
			if u.RawQuery != "" {
				p += "?" + u.RawQuery
			}
			out[s] = cleanPath(u.Host + "/" + strings.TrimPrefix(p, "/"))
			continue
		}
		local = append(local, s)
	}
	prefix := commonDir(local)
	for _, s := range local {
		out[s] = cleanPath(strings.TrimPrefix(strings.TrimPrefix(s, prefix), "/"))
	}
	return out
}

// commonDir is the directory every path lies in ("" for none).
func commonDir(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	dir := path.Dir(paths[0])
	for _, p := range paths[1:] {
		for dir != "." && dir != "/" && !strings.HasPrefix(p, dir+"/") {
			dir = path.Dir(dir)
		}
	}
	if dir == "." || dir == "/" {
		return ""
	}
	return dir
}

// cleanPath escapes each component so that the tree accepts it, as a URL
// escapes ("%" itself is "%25", so every escaped name decodes back to its
// source's); a component over 255 bytes is cut and named by its digest
// (that one does not decode).
func cleanPath(p string) string {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, c := range parts {
		if c == "" {
			continue
		}
		c = strings.ReplaceAll(c, "%", "%25")
		if c == "." || c == ".." {
			c = strings.ReplaceAll(c, ".", "%2E")
		}
		c = strings.ReplaceAll(c, "\x00", "%00")
		if len(c) > 255 {
			c = c[:200] + "%" + shortHash(c)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return "index"
	}
	return strings.Join(out, "/")
}
