package gitx

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

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

// DiffWith runs one diff as DiffSpec says and parses it as git writes it,
// within the limits of a parsed diff (ReadDiff).
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
	var d *Diff
	err := stream(ctx, root, args, func(r io.Reader) (err error) {
		d, err = ReadDiff(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", rng, err)
	}
	blobSizes(ctx, root, d)
	return d, nil
}

// blobSizes fills in the sizes of the diff's binary files from their blobs,
// asked of the repository's batch (one process for all of them, no new
// one per file). A size the batch cannot tell (an abbreviated id it finds
// ambiguous, an id it is not fed) stays 0: the page then names no size.
func blobSizes(ctx context.Context, root string, d *Diff) {
	size := func(oid string) int64 {
		if oid == "" || strings.Trim(oid, "0") == "" || !batchName(oid) {
			return 0
		}
		_, kind, n, err := batchFor(root).lookupSize(ctx, oid)
		if err != nil || kind != "blob" {
			return 0
		}
		return n
	}
	for i := range d.Files {
		f := &d.Files[i]
		if !f.IsBinary {
			continue
		}
		if !f.IsNew {
			f.OldSize = size(f.OldOID)
		}
		if !f.IsDelete {
			f.NewSize = size(f.NewOID)
		}
	}
}

// The limits of one parsed diff: whatever a commit holds, a diff keeps at
// most this much of it in memory, and so the review page, its JSON and the
// warm-up render at most this much. A file past a limit is TooLarge: its
// counts and blob ids are kept, its lines are not (the page links to the
// raw file instead).
const (
	// MaxLineBytes: a longer line keeps its first MaxLineBytes (at a
	// character's edge) and says its length in Line.Cut.
	MaxLineBytes = 4 << 10
	// MaxFileDiffLines and MaxFileDiffBytes: a file with more lines of
	// diff, or more bytes of diff as git wrote it, is TooLarge.
	MaxFileDiffLines = 20_000
	MaxFileDiffBytes = 2 << 20
	// MaxDiffLines and MaxDiffBytes bound the lines (and their kept text)
	// of all files together: the files after the budget is spent are
	// TooLarge.
	MaxDiffLines = 50_000
	MaxDiffBytes = 8 << 20
	// maxHeaderBytes bounds one file's header (names, modes, ids): git's
	// names are paths, far shorter.
	maxHeaderBytes = 64 << 10
)

// ParseDiff parses unified diff text as git writes it (ReadDiff).
func ParseDiff(text []byte) (*Diff, error) {
	return ReadDiff(bytes.NewReader(text))
}

// ReadDiff parses a unified diff as git writes it while it is read, line by
// line: it holds one line (at most maxHeaderBytes of it) beside what it
// keeps, and keeps no more than the limits above.
func ReadDiff(r io.Reader) (*Diff, error) {
	p := &diffParser{br: bufio.NewReaderSize(r, maxHeaderBytes), d: &Diff{Files: []File{}}}
	for {
		line, n, err := p.readLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := p.line(line, n); err != nil {
			return nil, err
		}
	}
	if err := p.endFile(); err != nil {
		return nil, err
	}
	return p.d, nil
}

// diffParser is ReadDiff's state.
type diffParser struct {
	br      *bufio.Reader
	scratch []byte // a line longer than br's buffer: its first part
	d       *Diff
	// the diff's kept lines and bytes so far
	lines, bytes int
	// the current file: its header until its first hunk, then the file
	inFile    bool
	header    []byte
	cur       File
	hunk      *Hunk
	curLines  int // the file's lines of diff, kept or not
	curBytes  int // the same lines' bytes as git wrote them
	curKept   int // bytes of text kept of the file
	old, nw   int // the next line numbers of the hunk
	oldLeft   int // lines the hunk header announced, not read yet
	newLeft   int
	seenHunks bool
}

// readLine returns the next line without its newline (at most
// maxHeaderBytes of it; the slice is valid until the next read) and its
// whole length, newline left out.
func (p *diffParser) readLine() ([]byte, int, error) {
	line, err := p.br.ReadSlice('\n')
	if err == nil || (err == io.EOF && len(line) > 0) {
		line = bytes.TrimSuffix(line, []byte{'\n'})
		return line, len(line), nil
	}
	if err != bufio.ErrBufferFull {
		return nil, 0, err
	}
	// a long line: keep its first buffer's worth, skip the rest
	p.scratch = append(p.scratch[:0], line...)
	n := len(line)
	for {
		more, err := p.br.ReadSlice('\n')
		n += len(more)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, 0, err
		}
		if err == nil {
			n-- // the newline
		}
		return p.scratch, n, nil
	}
}

// line takes one line of the diff.
func (p *diffParser) line(line []byte, n int) error {
	if bytes.HasPrefix(line, []byte("diff --git ")) {
		if err := p.endFile(); err != nil {
			return err
		}
		p.inFile, p.seenHunks, p.hunk = true, false, nil
		p.cur, p.curLines, p.curBytes, p.curKept = File{}, 0, 0, 0
		p.header = append(p.header[:0], line...)
		p.header = append(p.header, '\n')
		return nil
	}
	if !p.inFile {
		return nil // before the first file: nothing of ours
	}
	if bytes.HasPrefix(line, []byte("@@ ")) && p.oldLeft <= 0 && p.newLeft <= 0 {
		return p.startHunk(line)
	}
	if !p.seenHunks {
		if len(p.header)+len(line) >= maxHeaderBytes || n > maxHeaderBytes {
			return fmt.Errorf("parse diff: a file header is over %d bytes", maxHeaderBytes)
		}
		p.header = append(p.header, line...)
		p.header = append(p.header, '\n')
		return nil
	}
	if len(line) > 0 && line[0] == '\\' { // "\ No newline at end of file"
		if h := p.hunk; h != nil && len(h.Lines) > 0 {
			h.Lines[len(h.Lines)-1].NoEOL = true
		}
		return nil
	}
	if p.oldLeft <= 0 && p.newLeft <= 0 {
		return nil // past the hunk's announced lines: nothing git writes
	}
	op := byte(' ')
	if len(line) > 0 {
		op = line[0]
		line = line[1:]
	}
	ln := Line{}
	switch op {
	case ' ':
		ln.Kind, ln.Old, ln.New = Context, p.old, p.nw
		p.old, p.nw = p.old+1, p.nw+1
		p.oldLeft, p.newLeft = p.oldLeft-1, p.newLeft-1
	case '-':
		ln.Kind, ln.Old = Deleted, p.old
		p.old, p.oldLeft = p.old+1, p.oldLeft-1
		p.cur.Deleted++
	case '+':
		ln.Kind, ln.New = Added, p.nw
		p.nw, p.newLeft = p.nw+1, p.newLeft-1
		p.cur.Added++
	default:
		return fmt.Errorf("parse diff: %s: a hunk line starts with %q", p.cur.Path(), op)
	}
	p.curLines++
	p.curBytes += n
	if p.cur.TooLarge {
		return nil
	}
	text, cut := keep(line, MaxLineBytes)
	if cut {
		ln.Cut = n - 1 // the line less its sign
	}
	ln.Text = text
	p.curKept += len(text)
	if p.curLines > MaxFileDiffLines || p.curBytes > MaxFileDiffBytes ||
		p.lines+p.curLines > MaxDiffLines || p.bytes+p.curKept > MaxDiffBytes {
		p.cur.TooLarge, p.cur.Hunks, p.hunk = true, nil, nil
		return nil
	}
	p.hunk.Lines = append(p.hunk.Lines, ln)
	return nil
}

// keep is at most max bytes of b as a string, cut at a character's edge,
// and whether it was cut.
func keep(b []byte, max int) (string, bool) {
	if len(b) <= max {
		return string(b), false
	}
	k := max
	for k > max-utf8.UTFMax && k > 0 && !utf8.RuneStart(b[k]) {
		k--
	}
	return string(b[:k]), true
}

// startHunk begins a hunk at its "@@ -a,b +c,d @@ section" line; the first
// one of a file ends the file's header first.
func (p *diffParser) startHunk(line []byte) error {
	if !p.seenHunks {
		if err := p.parseHeader(); err != nil {
			return err
		}
		p.seenHunks = true
	}
	var h Hunk
	rest, ok := bytes.CutPrefix(line, []byte("@@ -"))
	var ranges, section []byte
	if ok {
		ranges, section, ok = bytes.Cut(rest, []byte(" @@"))
	}
	var oldR, newR []byte
	if ok {
		oldR, newR, ok = bytes.Cut(ranges, []byte(" +"))
	}
	if ok {
		h.OldStart, h.OldLines, ok = hunkRange(oldR)
	}
	if ok {
		h.NewStart, h.NewLines, ok = hunkRange(newR)
	}
	if !ok {
		return fmt.Errorf("parse diff: %s: bad hunk header %q", p.cur.Path(), line[:min(len(line), 80)])
	}
	h.Section, _ = keep(bytes.TrimPrefix(section, []byte(" ")), MaxLineBytes)
	p.old, p.nw, p.oldLeft, p.newLeft = h.OldStart, h.NewStart, h.OldLines, h.NewLines
	if p.cur.TooLarge {
		return nil
	}
	p.cur.Hunks = append(p.cur.Hunks, h)
	p.hunk = &p.cur.Hunks[len(p.cur.Hunks)-1]
	return nil
}

// hunkRange reads "start[,count]" (count 1 when left out).
func hunkRange(b []byte) (start, count int, ok bool) {
	s, c, hasCount := bytes.Cut(b, []byte(","))
	start, err := strconv.Atoi(string(s))
	if err != nil || start < 0 {
		return 0, 0, false
	}
	count = 1
	if hasCount {
		if count, err = strconv.Atoi(string(c)); err != nil || count < 0 {
			return 0, 0, false
		}
	}
	return start, count, true
}

// parseHeader reads the current file's names, modes and ids from its
// header (go-gitdiff reads git's quoting, renames and binary notes).
func (p *diffParser) parseHeader() error {
	files, _, err := gitdiff.Parse(bytes.NewReader(p.header))
	if err != nil {
		return fmt.Errorf("parse diff: %w", err)
	}
	if len(files) != 1 {
		return fmt.Errorf("parse diff: a file header names %d files", len(files))
	}
	f := files[0]
	p.cur = File{OldPath: f.OldName, NewPath: f.NewName, IsNew: f.IsNew, IsDelete: f.IsDelete, IsRename: f.IsRename, IsBinary: f.IsBinary,
		OldOID: f.OldOIDPrefix, NewOID: f.NewOIDPrefix, Similarity: f.Score}
	p.cur.OldMode, p.cur.NewMode = modes(f)
	return nil
}

// modes are a file's modes on each side in octal: "old mode"/"new mode",
// "new file mode", "deleted file mode", or the one mode of the index line
// when the mode did not change ("" for a side the file is not on).
func modes(f *gitdiff.File) (old, nw string) {
	o, n := f.OldMode, f.NewMode
	if n == 0 && !f.IsDelete {
		n = o // "index a..b 100644": the same on both sides
	}
	if f.IsNew {
		o = 0
	}
	if f.IsDelete {
		n = 0
	}
	if o != 0 {
		old = strconv.FormatUint(uint64(o), 8)
	}
	if n != 0 {
		nw = strconv.FormatUint(uint64(n), 8)
	}
	return old, nw
}

// endFile adds the current file to the diff.
func (p *diffParser) endFile() error {
	if !p.inFile {
		return nil
	}
	if !p.seenHunks {
		if err := p.parseHeader(); err != nil {
			return err
		}
	}
	if p.cur.TooLarge {
		p.cur.Hunks = nil
	} else {
		p.lines += p.curLines
		p.bytes += p.curKept
	}
	p.d.Files = append(p.d.Files, p.cur)
	p.inFile, p.hunk = false, nil
	return nil
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
