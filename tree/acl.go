package tree

// Visible reports whether e may be shown to a mount holding groups.
// Malformed access fields fail closed.
func (e *Entry) Visible(groups map[string]bool) bool {
	if !e.aclOK {
		return false
	}
	if e.IsPublic {
		return true
	}
	for _, g := range e.Groups {
		if groups[g] {
			return true
		}
	}
	return false
}

// GroupSet turns a list of group names into a set, ignoring empty names.
func GroupSet(groups []string) map[string]bool {
	set := make(map[string]bool, len(groups))
	for _, g := range groups {
		if g != "" {
			set[g] = true
		}
	}
	return set
}
