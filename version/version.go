// Package version is the product version label and the build's commit.
package version

import "runtime/debug"

// Label is the product version (spec §9).
const Label = "0.22"

// Commit is the VCS revision the binary was built from ("dev" when unknown),
// with "+dirty" when the tree had changes. -ldflags "-X lazy/version.commit=..."
// overrides it.
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

var commit string

// String is "0.22 (commit abc123)".
func String() string { return Label + " (commit " + Commit() + ")" }
