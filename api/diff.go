package api

import "io"

// LineKind says which side of a diff a line belongs to.
type LineKind int

// Line kinds.
const (
	Context LineKind = iota
	Added
	Deleted
)

// Line is one line of a hunk: Old and New are its numbers on each side (0
// when it has none there). Cut, when set, is the length in bytes of a line
// longer than a diff keeps: Text is then its beginning only.
type Line struct {
	Kind     LineKind
	Old, New int
	Text     string
	NoEOL    bool
	Cut      int `json:",omitempty"`
}

// IsAddition reports an added line.
func (l Line) IsAddition() bool { return l.Kind == Added }

// IsDeletion reports a deleted line.
func (l Line) IsDeletion() bool { return l.Kind == Deleted }

// Hunk is one @@ section.
type Hunk struct {
	OldStart, OldLines, NewStart, NewLines int
	Section                                string
	Lines                                  []Line
}

// File is one changed file of a diff. A file whose diff is too large to
// hold (TooLarge) has no hunks, only its counts; OldOID and NewOID are the
// blob ids git named (abbreviated), which tell its versions apart.
type File struct {
	OldPath, NewPath                    string
	IsNew, IsDelete, IsRename, IsBinary bool
	Hunks                               []Hunk
	Added, Deleted                      int
	TooLarge                            bool   `json:",omitempty"`
	OldOID, NewOID                      string `json:",omitempty"`
	// OldMode and NewMode are the file's modes as git writes them in
	// octal ("100644", "100755", "120000" for a symbolic link); "" on the
	// side the file is not (new: no OldMode, deleted: no NewMode)
	OldMode, NewMode string `json:",omitempty"`
	// Similarity is git's similarity index of a rename, in percent (0:
	// not given)
	Similarity int `json:",omitempty"`
	// OldSize and NewSize are a binary file's sizes in bytes on each side
	// (0: not there, or not known)
	OldSize, NewSize int64 `json:",omitempty"`
}

// ModeSymlink is the mode git gives a symbolic link.
const ModeSymlink = "120000"

// ModeChanged reports whether the file's mode changed (644 to 755, or a
// file that became a link).
func (f File) ModeChanged() bool {
	return f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode
}

// IsSymlink reports whether either side of the file is a symbolic link:
// its diff is the link's target as text, never the file it names.
func (f File) IsSymlink() bool { return f.OldMode == ModeSymlink || f.NewMode == ModeSymlink }

// IsEmpty reports whether the file was added or removed empty: a diff
// with no lines and no binary content.
func (f File) IsEmpty() bool {
	return (f.IsNew || f.IsDelete) && !f.IsBinary && !f.TooLarge && len(f.Hunks) == 0 && f.Added == 0 && f.Deleted == 0
}

// Path is the file's current path (the old one for a deletion).
func (f File) Path() string {
	if f.IsDelete {
		return f.OldPath
	}
	return f.NewPath
}

// RawFile is one changed file's own bytes as the task branch holds them
// (the old side: as the parent held them), streamed; it never travels as
// JSON. The reader of Body closes it.
type RawFile struct {
	Path   string
	Size   int64
	Binary bool
	Body   io.ReadCloser
}

// MergeCheck is a dry-run merge of a task branch into its parent.
type MergeCheck struct {
	Clean     bool     `json:"clean"`
	Conflicts []string `json:"conflicts,omitempty"` // files the merge would leave conflicted
	Ahead     int      `json:"ahead"`               // commits of the branch the parent lacks
	Behind    int      `json:"behind"`              // commits of the parent the branch lacks
}
