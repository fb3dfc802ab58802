// Package policy decides who may attach which view: a list of rules read
// from a YAML file, each naming subjects (who) and what they may ask for
// (collections, and the access groups of those collections).
//
//	# policy.yaml: a list of rules
//	- users: [65534, agent-runner]     # uids or user names
//	  unix_groups: [agents]            # gids or group names
//	  collections: [docs]              # "*" for every collection
//	  groups: [billing]                # what they may ask for; [] = public pages only
//
// Rules may also name the subjects of the container front ends: pods by
// namespaces: [...] or service_accounts: [namespace/name] (CSI, from
// kubelet's pod info), and volumes made through Docker by docker: true. A
// pod without pod info gets public pages only; neither is ever root.
//
// The subject of a request comes from the kernel (the socket's peer
// credentials), never from what the client says. Root may attach
// anything; every other subject only what some rule grants it; with no
// policy, root only. A request for a group no matching rule grants is
// refused, never silently narrowed: an agent that asked for billing and
// got the public view would answer wrongly, without knowing why.
//
// Rules add up: the groups a subject may ask for in a collection are the
// union of the groups of every rule that names the subject and the
// collection. "*" grants every collection of the daemon's database (the
// one --database names; a collection's name is checked against Chroma's
// rules, so it cannot reach another database), with the rule's groups.
//
// Limits bound what one subject may hold at once, so that no subject can
// take what the host has for everyone (root has none):
//
//	# a rule of limits alone
//	- users: [agent-runner]
//	  limits: {attachments: 2000, mounts: 64, private_mounts: 16, layouts: 4}
//
// attachments counts the subject's attachments; mounts the FUSE mounts
// they make (one per view it attaches, shared by its attachments of that
// view, and one per private attachment: each is served apart);
// private_mounts the private attachments (--private); layouts the
// distinct layouts other than the daemon's default among them (each one
// opens the collection again: its own read engine, cache and tree). A subject's
// limit is the largest any rule naming it sets (a rule may raise or lower
// the default), else DefaultLimits. A rule may hold limits alone (no
// collections, no groups).
//
// Names are resolved once, when the policy is loaded, so a user renamed
// later keeps the uid the rule meant; an unknown name is an error at
// load, not a rule that silently matches nobody.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/chromafs/chromafs/chroma/name"
)

// Subject is who asks: a unix user as the kernel says (UID, GIDs), or,
// for the container front ends, a Kubernetes pod (Pod) or a volume made
// through Docker (Docker). A pod or Docker subject is never root, whoever
// relayed it (kubelet and dockerd call as root): a pod spec or a volume
// option must not be a way around the policy.
type Subject struct {
	UID  uint32
	GIDs []uint32 // primary and supplementary groups
	// Pod is set for a CSI request (its namespace and service account from
	// kubelet's pod info; empty when kubelet gave none: the public view
	// only).
	Pod *Pod
	// Docker is set for a volume created or mounted through Docker.
	Docker bool
}

// Pod names a pod's namespace and service account.
type Pod struct {
	Namespace, ServiceAccount string
}

// Unix reports whether s is a unix user (not a pod or Docker).
func (s Subject) Unix() bool { return s.Pod == nil && !s.Docker }

// Root reports whether s is root (a unix user of uid 0).
func (s Subject) Root() bool { return s.Unix() && s.UID == 0 }

func (s Subject) String() string {
	switch {
	case s.Docker:
		return "docker"
	case s.Pod != nil && s.Pod.Namespace == "":
		return "a pod without pod info"
	case s.Pod != nil:
		return "pod of service account " + s.Pod.Namespace + "/" + s.Pod.ServiceAccount
	}
	return "uid " + strconv.FormatUint(uint64(s.UID), 10)
}

// rule is one entry of the file, resolved.
type rule struct {
	uids, gids  []uint32
	namespaces  []string
	accounts    []string // namespace/name
	docker      bool
	collections []string // "*" matches every collection
	groups      []string
	limits      fileLimit // the limits it sets (nil: not set)
	line        int
}

// file is the YAML shape of one rule.
type file struct {
	Users           []string   `yaml:"users"`
	UnixGroups      []string   `yaml:"unix_groups"`
	Namespaces      []string   `yaml:"namespaces"`
	ServiceAccounts []string   `yaml:"service_accounts"`
	Docker          bool       `yaml:"docker"`
	Collections     []string   `yaml:"collections"`
	Groups          *[]string  `yaml:"groups"`
	Limits          *fileLimit `yaml:"limits"`
}

// fileLimit is the YAML shape of a rule's limits; a nil field is not set.
type fileLimit struct {
	Attachments   *int `yaml:"attachments"`
	Mounts        *int `yaml:"mounts"`
	PrivateMounts *int `yaml:"private_mounts"`
	Layouts       *int `yaml:"layouts"`
}

// Limits are what one subject may hold at once.
type Limits struct {
	// Attachments is how many attachments (of any kind).
	Attachments int
	// Mounts is how many FUSE mounts its attachments make: one per view
	// (collection, layout, groups) it attaches, shared by its attachments
	// of that view, and one per private attachment; each is served apart
	// (reader threads, its own kernel caches).
	Mounts int
	// PrivateMounts is how many of them are private attachments' own.
	PrivateMounts int
	// Layouts is how many distinct layouts other than the daemon's default
	// its attachments may use.
	Layouts int
}

// DefaultLimits are a subject's limits when no rule naming it sets them.
var DefaultLimits = Limits{Attachments: 256, Mounts: 16, PrivateMounts: 8, Layouts: 2}

// maxLimit bounds a limit a rule may set (a typo of a few digits must not
// read as "no limit").
const maxLimit = 1 << 20

// Policy is a loaded policy. The zero value, and nil, allow root only.
type Policy struct {
	rules []rule
}

// ErrRefused is wrapped by every refusal of Allow.
var ErrRefused = errors.New("refused by the policy")

// Load reads the policy at path ("" is no policy: root only).
func Load(path string) (*Policy, error) {
	if path == "" {
		return &Policy{}, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("policy %s has mode %04o: others could grant themselves anything; make it writable by its owner only (chmod go-w %s)", path, st.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	return p, nil
}

// Parse reads a policy from YAML: a list of rules. Unknown keys, a rule
// without subjects or collections, or without groups (write [] for
// public pages only) are errors.
func Parse(data []byte) (*Policy, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Policy{}, nil // an empty file: no rules
		}
		return nil, err
	}
	if len(doc.Content) == 0 {
		return &Policy{}, nil
	}
	list := doc.Content[0]
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: want a list of rules (- users: [...] ...)", list.Line)
	}
	p := &Policy{}
	for _, n := range list.Content {
		var f file
		if err := decodeStrict(n, &f); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		r, err := resolve(f)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		r.line = n.Line
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// decodeStrict decodes n into v, refusing keys v does not have.
func decodeStrict(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return errors.New("want a rule: users/unix_groups, collections and groups")
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	return dec.Decode(v)
}

func resolve(f file) (rule, error) {
	var r rule
	if len(f.Users) == 0 && len(f.UnixGroups) == 0 && len(f.Namespaces) == 0 && len(f.ServiceAccounts) == 0 && !f.Docker {
		return r, errors.New("a rule names its subjects: users, unix_groups, namespaces, service_accounts or docker: true")
	}
	for _, ns := range f.Namespaces {
		if ns = strings.TrimSpace(ns); ns == "" || strings.Contains(ns, "/") {
			return r, fmt.Errorf("namespaces: %q is not a namespace", ns)
		}
		r.namespaces = append(r.namespaces, ns)
	}
	for _, sa := range f.ServiceAccounts {
		ns, name, ok := strings.Cut(strings.TrimSpace(sa), "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return r, fmt.Errorf("service_accounts: %q: want namespace/name", sa)
		}
		r.accounts = append(r.accounts, ns+"/"+name)
	}
	r.docker = f.Docker
	if f.Limits != nil {
		for _, l := range []struct {
			name string
			v    *int
		}{{"attachments", f.Limits.Attachments}, {"mounts", f.Limits.Mounts}, {"private_mounts", f.Limits.PrivateMounts}, {"layouts", f.Limits.Layouts}} {
			if l.v != nil && (*l.v < 0 || *l.v > maxLimit) {
				return r, fmt.Errorf("limits: %s: %d: want 0 to %d", l.name, *l.v, maxLimit)
			}
		}
		r.limits = *f.Limits
	}
	limitsOnly := f.Limits != nil && len(f.Collections) == 0 && f.Groups == nil
	if len(f.Collections) == 0 && !limitsOnly {
		return r, errors.New(`a rule names its collections: collections: [docs] (or ["*"])`)
	}
	if f.Groups == nil && !limitsOnly {
		return r, errors.New("a rule names the groups it grants: groups: [billing], or [] for public pages only")
	}
	if f.Groups == nil {
		f.Groups = &[]string{}
	}
	for _, u := range f.Users {
		id, err := lookupID(u, func(name string) (string, error) {
			usr, err := user.Lookup(name)
			if err != nil {
				return "", err
			}
			return usr.Uid, nil
		})
		if err != nil {
			return r, fmt.Errorf("users: %w", err)
		}
		r.uids = append(r.uids, id)
	}
	for _, g := range f.UnixGroups {
		id, err := lookupID(g, func(name string) (string, error) {
			grp, err := user.LookupGroup(name)
			if err != nil {
				return "", err
			}
			return grp.Gid, nil
		})
		if err != nil {
			return r, fmt.Errorf("unix_groups: %w", err)
		}
		r.gids = append(r.gids, id)
	}
	for _, c := range f.Collections {
		if c = strings.TrimSpace(c); c == "" {
			return r, errors.New("collections: an empty name")
		}
		if c != "*" {
			if err := name.CheckCollection(c); err != nil {
				return r, fmt.Errorf("collections: %w", err)
			}
		}
		r.collections = append(r.collections, c)
	}
	for _, g := range *f.Groups {
		if g = strings.TrimSpace(g); g == "" || strings.ContainsAny(g, ", ") {
			return r, fmt.Errorf("groups: %q is not a group name", g)
		}
		r.groups = append(r.groups, g)
	}
	return r, nil
}

// lookupID reads a numeric id, or resolves a name with look.
func lookupID(s string, look func(string) (string, error)) (uint32, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	if s == "" {
		return 0, errors.New("an empty name")
	}
	id, err := look(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: id %q: %w", s, id, err)
	}
	return uint32(n), nil
}

func (r rule) matches(s Subject) bool {
	switch {
	case s.Docker:
		return r.docker
	case s.Pod != nil:
		return s.Pod.Namespace != "" && (slices.Contains(r.namespaces, s.Pod.Namespace) ||
			slices.Contains(r.accounts, s.Pod.Namespace+"/"+s.Pod.ServiceAccount))
	}
	if slices.Contains(r.uids, s.UID) {
		return true
	}
	for _, g := range s.GIDs {
		if slices.Contains(r.gids, g) {
			return true
		}
	}
	return false
}

func (r rule) names(collection string) bool {
	return slices.Contains(r.collections, collection) || slices.Contains(r.collections, "*")
}

// Granted returns the groups s may ask for in collection, and whether any
// rule lets s attach collection at all. Root is granted everything (nil,
// true: any groups).
func (p *Policy) Granted(s Subject, collection string) (groups []string, ok bool) {
	if s.Root() {
		return nil, true
	}
	if s.Pod != nil && s.Pod.Namespace == "" {
		return nil, true // no pod info: the public view of any collection, nothing more
	}
	if p == nil {
		return nil, false
	}
	set := map[string]bool{}
	for _, r := range p.rules {
		if r.matches(s) && r.names(collection) {
			ok = true
			for _, g := range r.groups {
				set[g] = true
			}
		}
	}
	for g := range set {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	return groups, ok
}

// Allow returns nil when s may attach collection with groups, else an
// error wrapping ErrRefused that says what s may ask for.
func (p *Policy) Allow(s Subject, collection string, groups []string) error {
	granted, ok := p.Granted(s, collection)
	if !ok {
		return fmt.Errorf("%s may not attach collection %q: %w", s, collection, ErrRefused)
	}
	if s.Root() {
		return nil
	}
	var denied []string
	for _, g := range groups {
		if !slices.Contains(granted, g) {
			denied = append(denied, g)
		}
	}
	if len(denied) > 0 {
		may := "public pages only"
		if len(granted) > 0 {
			may = "groups " + strings.Join(granted, ",")
		}
		return fmt.Errorf("%s may not ask for group(s) %s of collection %q (granted: %s): %w", s, strings.Join(denied, ","), collection, may, ErrRefused)
	}
	return nil
}

// Limits returns what s may hold at once: for each limit, the largest
// value a rule naming s sets, else DefaultLimits'. Root has no limits
// (ok false).
func (p *Policy) Limits(s Subject) (l Limits, ok bool) {
	if s.Root() {
		return Limits{}, false
	}
	l = DefaultLimits
	var set [4]bool
	if p != nil {
		for _, r := range p.rules {
			if !r.matches(s) {
				continue
			}
			for i, f := range []struct {
				v   *int
				dst *int
			}{{r.limits.Attachments, &l.Attachments}, {r.limits.Mounts, &l.Mounts}, {r.limits.PrivateMounts, &l.PrivateMounts}, {r.limits.Layouts, &l.Layouts}} {
				if f.v != nil && (!set[i] || *f.v > *f.dst) {
					*f.dst, set[i] = *f.v, true
				}
			}
		}
	}
	return l, true
}

// Key names s for counting what it holds: one key per unix user (its
// uid, whatever its groups), per pod service account, or Docker.
func (s Subject) Key() string {
	switch {
	case s.Docker:
		return "docker"
	case s.Pod != nil:
		return "pod:" + s.Pod.Namespace + "/" + s.Pod.ServiceAccount
	}
	return "uid:" + strconv.FormatUint(uint64(s.UID), 10)
}

// Rules is how many rules the policy holds.
func (p *Policy) Rules() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}
