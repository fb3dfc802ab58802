package ingest

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Access is a page's access control as read from its frontmatter.
type Access struct {
	Public bool
	Groups []string
}

// maxFrontmatter bounds how far the closing "---" is looked for.
const maxFrontmatter = 64 << 10

// ParseAccess reads Mintlify's access keys from YAML frontmatter at the
// start of a page (after an optional BOM): `public: true|false` and
// `groups: [a, b]`. A page without frontmatter, or without these keys, gets
// def as public and no groups; a page that names groups but not `public` is
// private. Malformed frontmatter fails closed: not public, no groups, and an
// error saying why.
func ParseAccess(data []byte, def bool) (Access, error) {
	body, ok, err := frontmatter(data)
	if err != nil || !ok {
		if err != nil {
			return Access{}, err
		}
		return Access{Public: def}, nil
	}
	var fm map[string]any
	if err := yaml.Unmarshal(body, &fm); err != nil {
		return Access{}, fmt.Errorf("frontmatter is not valid YAML: %v", firstLineOf(err.Error()))
	}
	return accessFrom(fm, def)
}

func accessFrom(fm map[string]any, def bool) (Access, error) {
	a := Access{Public: def}
	groups, hasGroups := fm["groups"]
	if hasGroups && groups != nil {
		list, ok := groups.([]any)
		if !ok {
			return Access{}, fmt.Errorf("frontmatter groups is not a list")
		}
		for _, g := range list {
			s, ok := g.(string)
			if !ok || s == "" {
				return Access{}, fmt.Errorf("frontmatter groups has a non-string or empty item %v", g)
			}
			a.Groups = append(a.Groups, s)
		}
		if len(a.Groups) > 0 {
			a.Public = false
		}
	}
	if pub, ok := fm["public"]; ok {
		b, isBool := pub.(bool)
		if !isBool {
			return Access{}, fmt.Errorf("frontmatter public is %v, not true or false", pub)
		}
		a.Public = b
	}
	return a, nil
}

// frontmatter returns the YAML between a leading "---" line and the next
// "---" (or "...") line. ok is false when the page has no frontmatter.
func frontmatter(data []byte) (body []byte, ok bool, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first, rest, found := cutLine(data)
	if !found || trimRight(first) != "---" {
		return nil, false, nil
	}
	bodyStart := len(data) - len(rest)
	for off := bodyStart; off < len(data) && off-bodyStart <= maxFrontmatter; {
		line, next, _ := cutLine(data[off:])
		if t := trimRight(line); t == "---" || t == "..." {
			return data[bodyStart:off], true, nil
		}
		off = len(data) - len(next)
	}
	return nil, false, fmt.Errorf("frontmatter opened with --- is never closed")
}

// cutLine splits off the first line, without its "\n" or "\r\n".
func cutLine(b []byte) (line, rest []byte, found bool) {
	line, rest, found = bytes.Cut(b, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), rest, found
}

func trimRight(b []byte) string { return string(bytes.TrimRight(b, " \t")) }

func firstLineOf(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
