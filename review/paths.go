package review

import (
	"path"
	"strings"

	"lazy/errkind"
)

// MatchGlob matches a slash-separated path against a pattern where "**"
// stands for any number of directories (including none) and every other
// segment follows path.Match.
func MatchGlob(pattern, p string) bool {
	return matchSegs(strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(strings.Trim(p, "/"), "/"))
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// MatchAny reports whether p matches one of the patterns.
func MatchAny(patterns []string, p string) bool {
	for _, g := range patterns {
		if MatchGlob(g, p) {
			return true
		}
	}
	return false
}

// OutOfScope lists the changed paths outside scope (an empty scope allows
// everything) that the reviewer has not allowed.
func OutOfScope(scope, changed []string, allowed map[string]bool) []string {
	if len(scope) == 0 {
		return nil
	}
	var out []string
	for _, c := range changed {
		if !MatchAny(scope, c) && !allowed[c] {
			out = append(out, c)
		}
	}
	return out
}

// NeedApproval lists the changed protected paths not yet approved.
func NeedApproval(protect, changed []string, approved map[string]bool) []string {
	var out []string
	for _, c := range changed {
		if MatchAny(protect, c) && !approved[c] {
			out = append(out, c)
		}
	}
	return out
}

// RuleError is a refusal by one of this package's rules: its Reason is the
// rule's wording, shown as it is.
type RuleError struct{ Reason string }

func (e *RuleError) Error() string { return e.Reason }

// ErrorKind is errkind.Rule.
func (e *RuleError) ErrorKind() errkind.Kind { return errkind.Rule }

// Err is the verdict as an error (nil when allowed).
func (v Verdict) Err() error {
	if v.OK {
		return nil
	}
	return &RuleError{Reason: v.Reason}
}
