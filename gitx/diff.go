package gitx

import (
	"bytes"
	"context"
	"fmt"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"lazy/api"
)

// A parsed diff is made directly in its wire form (package api), the one
// the review page, the RPC and the dev server read: no copy between git and
// the web.
type (
	// LineKind tells a diff line's role.
	LineKind = api.LineKind
	// Line is one line of a hunk. A deleted line has only an Old number, an
	// added line only a New number, a context line both: the two number
	// spaces are tracked independently.
	Line = api.Line
	// Hunk is one @@ section.
	Hunk = api.Hunk
	// File is one changed file.
	File = api.File
)

// Line kinds.
const (
	Context = api.Context
	Added   = api.Added
	Deleted = api.Deleted
)

// Diff is a whole parsed diff.
type Diff struct {
	Files []File
}

// DiffBranch diffs branch against its merge base with parent (parent...branch).
func DiffBranch(ctx context.Context, root, parent, branch string) (*Diff, error) {
	return DiffWith(ctx, root, DiffSpec{From: parent, To: branch, MergeBase: true})
}

// DiffSpec says what to diff.
type DiffSpec struct {
	From, To  string
	MergeBase bool     // From...To: what To changed since it left From
	Context   int      // lines of context around each change (0: git's 3)
	Paths     []string // only these paths (none: every path)
}

// DiffWith runs one diff as DiffSpec says and parses it.
func DiffWith(ctx context.Context, root string, s DiffSpec) (*Diff, error) {
	rng := s.From + ".." + s.To
	if s.MergeBase {
		rng = s.From + "..." + s.To
	}
	// paths are literal: no pathspec magic from whoever named them
	args := []string{"--literal-pathspecs", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", "--src-prefix=a/", "--dst-prefix=b/"}
	if s.Context > 0 {
		args = append(args, fmt.Sprintf("-U%d", s.Context))
	}
	args = append(args, rng, "--")
	args = append(args, s.Paths...)
	out, err := RunRaw(ctx, root, args...)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", rng, err)
	}
	return ParseDiff(out)
}

// ParseDiff parses unified diff text as git writes it.
func ParseDiff(text []byte) (*Diff, error) {
	files, _, err := gitdiff.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse diff: %w", err)
	}
	d := &Diff{Files: make([]File, 0, len(files))}
	for _, f := range files {
		out := File{OldPath: f.OldName, NewPath: f.NewName, IsNew: f.IsNew, IsDelete: f.IsDelete, IsRename: f.IsRename, IsBinary: f.IsBinary}
		for _, frag := range f.TextFragments {
			h := Hunk{OldStart: int(frag.OldPosition), OldLines: int(frag.OldLines), NewStart: int(frag.NewPosition), NewLines: int(frag.NewLines), Section: frag.Comment}
			old, nw := int(frag.OldPosition), int(frag.NewPosition)
			for _, l := range frag.Lines {
				text := l.Line
				noEOL := l.NoEOL()
				if n := len(text); n > 0 && text[n-1] == '\n' {
					text = text[:n-1]
				}
				ln := Line{Text: text, NoEOL: noEOL}
				switch l.Op {
				case gitdiff.OpContext:
					ln.Kind, ln.Old, ln.New = Context, old, nw
					old++
					nw++
				case gitdiff.OpDelete:
					ln.Kind, ln.Old = Deleted, old
					old++
					out.Deleted++
				case gitdiff.OpAdd:
					ln.Kind, ln.New = Added, nw
					nw++
					out.Added++
				}
				h.Lines = append(h.Lines, ln)
			}
			out.Hunks = append(out.Hunks, h)
		}
		d.Files = append(d.Files, out)
	}
	return d, nil
}

// Find returns the line at (path, side, number) and whether it is in the diff.
// side is "old" or "new".
func (d *Diff) Find(path, side string, number int) (Line, bool) {
	for _, f := range d.Files {
		if f.Path() != path && f.OldPath != path {
			continue
		}
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				if side == "old" && l.Old == number && l.Kind != Added {
					return l, true
				}
				if side == "new" && l.New == number && l.Kind != Deleted {
					return l, true
				}
			}
		}
	}
	return Line{}, false
}
