package views

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"html/template"
	"time"

	"github.com/alecthomas/chroma/v2"

	"lazy/api"
	"lazy/review"
)

// FragID is a diff line's fragment id: l-<url-encoded path>-<side>-<line>.
func FragID(path, side string, line int) string {
	return fmt.Sprintf("l-%s-%s-%d", url.PathEscape(path), side, line)
}

// ToolbarMode is one control of the diff toolbar.
type ToolbarMode struct {
	Name    string // shown label
	Key     string // localStorage key
	Default string
	Options []ToolbarOption
}

// ToolbarOption is one choice of a mode.
type ToolbarOption struct{ Value, Label string }

// Toolbar is the diff view's modes, defined once as a list; the template and
// the script both follow it.
var Toolbar = []ToolbarMode{
	{Name: "Layout", Key: "lazy:difflayout", Default: "unified", Options: []ToolbarOption{{"unified", "Unified"}, {"split", "Split"}}},
	{Name: "Long lines", Key: "lazy:diffwrap", Default: "scroll", Options: []ToolbarOption{{"scroll", "Scroll"}, {"wrap", "Wrap"}}},
	{Name: "Tabs", Key: "lazy:difftabs", Default: "4", Options: []ToolbarOption{{"2", "2"}, {"4", "4"}, {"8", "8"}}},
}

// DiffView is one rendered diff: the review page's or a commit's.
type DiffView struct {
	TaskID      string
	CSRF        string // the session's form token, for the comment forms
	Files       []FileView
	Commentable bool
	Empty       bool
	// EmptyText says why Empty ("": no changes against the parent yet)
	EmptyText string
	Added     int
	Deleted   int
	// Expandable: files link to more context and to the whole file; Full is
	// the file shown with more context, Context how much (0: whole)
	Expandable bool
	Full       string
	Context    int
	// Open is a file the reviewer asked to see (?open=); LazyURL, when set,
	// is where the script loads a closed file's rows from (the file's path
	// is appended, query-escaped): files past the page's budget are then
	// sent without their rows
	Open    string
	LazyURL string
	// RawURL, when set, is where a file's own bytes are served (the path
	// is appended, query-escaped): a file too large to show, or binary,
	// links there
	RawURL string
	// Draft is the text of the open comment form (a comment the daemon
	// refused, put back where it was typed)
	Draft string
	// Sources, when set, reads the changed files' whole texts by blob id
	// (api.DiffResult.Sources): a file is then lexed whole and its tokens
	// sliced to the hunks, so a hunk that starts inside a string or a
	// comment is read as one. Without it, or for a blob it leaves out,
	// each hunk is lexed by itself.
	Sources func(ids []string) map[string][]byte
}

// SetDraft puts body back into the open comment form of the line frag and
// makes sure its file is shown; false when no line of the diff is frag (a
// reply, or a line the diff no longer has): the caller shows body elsewhere.
func (d *DiffView) SetDraft(frag, body string) bool {
	for _, f := range d.Files {
		for _, h := range f.Hunks {
			for _, r := range h.Rows {
				if r.CommentOpen && r.FragID == frag {
					d.Draft, d.Open = body, f.Path
					return true
				}
			}
		}
	}
	return false
}

// FileView is one file of a diff.
type FileView struct {
	Path, OldPath      string
	IsNew, IsDelete    bool
	IsRename, IsBinary bool
	// TooLarge: the diff held no lines of it (gitx's limits); the page
	// says so and links to the raw file
	TooLarge       bool
	Added, Deleted int
	// what changed besides lines (gitx reads them from git's extended
	// headers): modes in octal ("" on a side the file is not), a rename's
	// similarity in percent (0: not given), a binary file's sizes (0: not
	// known), an empty file added or removed, a symbolic link's target (the
	// link's text: never followed)
	OldMode, NewMode string
	Similarity       int
	OldSize, NewSize int64
	IsEmpty          bool
	IsSymlink        bool
	LinkTarget       string
	Hunks            []HunkView
	// Hash identifies the file's diff: a viewed mark made on another hash
	// is void (the file changed since)
	Hash string
	// Viewed: the reviewer marked this content of the file's diff viewed
	// (ApplyReviewState); the file starts closed, its box ticked
	Viewed bool
	// OldOID and NewOID are the blob ids of the file's two sides, as the
	// diff names them ("" or zeros where a side is absent)
	OldOID, NewOID string
	// highlighted: its rows carry their tokens already
	highlighted bool
}

// HunkView is one @@ section.
type HunkView struct {
	Header string
	Rows   []RowView
}

// RowView is one diff line in the unified table, stamped for the split view:
// Pair groups the lines that sit side by side, Pane says where this one goes.
type RowView struct {
	IsContext, IsAddition, IsDeletion bool
	Old, New                          int
	Text                              string
	// Cut is the length of a line longer than a diff keeps (Text is its
	// beginning); 0 for a whole line
	Cut int
	// the anchor of the line's own side (new for context and additions)
	File   string
	Side   string
	Line   int
	FragID string
	Pair   string
	Pane   string // old | new | both
	// Hl are the text's highlighted tokens; Marks the words that changed
	// against the paired line of the other side (rendered <ins>/<del>)
	Hl, Marks []Span
	// Threads anchored on this line
	Threads []ThreadView
	// CommentOpen: render the no-script comment form under this line
	CommentOpen bool
}

// ThreadView is one thread with its messages.
type ThreadView struct {
	TaskID                   string
	CSRF                     string
	Commentable              bool
	ID, File, Side, LineText string
	Line                     int
	// StartLine is the first line of a thread on a range (0: one line)
	StartLine int
	FragID    string
	Orphan    bool
	Messages  []MessageView
	// PortedFrom is the line the thread was made on, when the text it was
	// made on now sits on another line (Line) and the thread moved with it;
	// Outdated: the text it was made on is nowhere in the file's diff now
	PortedFrom int
	Outdated   bool
	// Settled: its change requests were delivered and nothing in it waits
	// for anyone, so it starts collapsed to one line
	Settled bool
	// Resolved: the reviewer resolved it and no message came since
	// (ApplyReviewState); QueuedResolved counts its comments still queued
	// for the next unblock (resolving does not withdraw them)
	Resolved       bool
	QueuedResolved int
}

// MessageView is one message of a thread, with what the reviewer may do.
type MessageView struct {
	ID, Body, Actor, State, StateClass, Error string
	IsAgent, IsAsk, IsWithdrawn               bool
	CanRetry, CanWithdraw                     bool
	WhyNoWithdraw                             string
	// DeliveredTurn is the work turn that carried this comment (0: not
	// delivered); TurnCommit the commit that turn made, if one is known
	DeliveredTurn int
	TurnCommit    *CommitRow
	// HTML is the message's Markdown rendered and sanitized (MessageHTML;
	// a suggestion block is left out of it: Suggestion shows it); At when
	// it was written
	HTML       template.HTML
	At         time.Time
	Suggestion *SuggestionView
}

// BuildDiff turns parsed files and threads into the view; threads whose
// anchor is in the diff are attached to their line, the rest are returned
// as orphans. open is the fragment id of a line whose comment form is open.
// commentable false makes it a record (an ended task's): no comment forms,
// no reply, no message offers Re-send or Withdraw, and a comment still
// queued says it was never delivered.
func BuildDiff(files []api.File, threads []review.Thread, taskID, csrf string, commentable bool, open string) (DiffView, []ThreadView) {
	return BuildDiffAt(0, files, threads, taskID, csrf, commentable, open)
}

// BuildDiffAt is BuildDiff of files that sit at index first of a whole
// diff (one file the page loads by itself): its rows carry the ids they
// have on the page.
func BuildDiffAt(first int, files []api.File, threads []review.Thread, taskID, csrf string, commentable bool, open string) (DiffView, []ThreadView) {
	byAnchor := map[string][]ThreadView{}
	var orphans []ThreadView
	lines := indexLines(files)
	for _, t := range threads {
		tv := BuildThread(t, taskID, csrf)
		tv.Commentable = commentable
		if !commentable {
			for i := range tv.Messages {
				m := &tv.Messages[i]
				m.CanRetry, m.CanWithdraw, m.WhyNoWithdraw = false, false, ""
				if m.StateClass == "queued" {
					m.State = "never delivered: the task ended first"
				}
			}
		}
		placed := placeThread(&tv, lines)
		fillSuggestions(&tv, lines, placed)
		if !placed {
			tv.Orphan = true
			orphans = append(orphans, tv)
			continue
		}
		byAnchor[tv.FragID] = append(byAnchor[tv.FragID], tv)
	}
	d := DiffView{TaskID: taskID, CSRF: csrf, Commentable: commentable, Empty: len(files) == 0}
	for fi, f := range files {
		fv := FileView{Path: f.Path(), OldPath: f.OldPath, IsNew: f.IsNew, IsDelete: f.IsDelete, IsRename: f.IsRename, IsBinary: f.IsBinary, TooLarge: f.TooLarge, Added: f.Added, Deleted: f.Deleted,
			OldMode: f.OldMode, NewMode: f.NewMode, Similarity: f.Similarity, OldSize: f.OldSize, NewSize: f.NewSize, IsEmpty: f.IsEmpty(), IsSymlink: f.IsSymlink()}
		if fv.IsSymlink {
			fv.LinkTarget = linkTarget(f)
		}
		d.Added += f.Added
		d.Deleted += f.Deleted
		for hi, h := range f.Hunks {
			hv := HunkView{Header: fmt.Sprintf("@@ -%d,%d +%d,%d @@ %s", h.OldStart, h.OldLines, h.NewStart, h.NewLines, h.Section)}
			hv.Rows = pairRows(h.Lines, fmt.Sprintf("f%d-h%d", first+fi, hi))
			for i := range hv.Rows {
				r := &hv.Rows[i]
				path := f.Path()
				if r.IsDeletion && f.OldPath != "" {
					path = f.OldPath
				}
				r.File = path
				r.FragID = FragID(path, r.Side, r.Line)
				r.Threads = byAnchor[r.FragID]
				r.CommentOpen = commentable && open == r.FragID
			}
			fv.Hunks = append(fv.Hunks, hv)
		}
		fv.Hash = fileHash(f)
		fv.OldOID, fv.NewOID = f.OldOID, f.NewOID
		d.Files = append(d.Files, fv)
	}
	return d, orphans
}

// HighlightFiles highlights the files of d at the given indexes (all of
// them when files is nil), on every CPU. A file whose blobs d.Sources gives
// is lexed whole, once per blob id (cached), and its tokens are sliced to
// the hunks' lines: a hunk that starts inside a raw string or a block
// comment is coloured as one. Any other file (no Sources, a blob over
// maxWholeBytes) is lexed hunk by hunk. A file whose name says no language
// and has no extension gets one by its shebang or its content.
func HighlightFiles(d *DiffView, files []int) {
	if files == nil {
		files = make([]int, len(d.Files))
		for i := range files {
			files[i] = i
		}
	}
	var jobs []hlJob
	var need []string
	for _, i := range files {
		f := &d.Files[i]
		if f.IsBinary || f.TooLarge || f.highlighted {
			continue
		}
		f.highlighted = true
		j := hlJob{f: f, lexer: lexerFor(f.Path)}
		if !f.IsDelete {
			j.newID = blobID(f.NewOID)
		}
		if f.IsDelete || f.Deleted > 0 {
			j.oldID = blobID(f.OldOID)
		}
		if j.lexer == nil && filepath.Ext(filepath.Base(f.Path)) == "" {
			j.byContent = true
			j.lexer = blobLexer(j.newID, j.oldID)
		}
		for _, id := range []string{j.newID, j.oldID} {
			if id != "" && (j.lexer == nil || !hlCache.has(wholeKey(j.lexer, id))) {
				need = append(need, id)
			}
		}
		jobs = append(jobs, j)
	}
	var texts map[string][]byte
	if len(need) > 0 && d.Sources != nil {
		texts = d.Sources(need)
	}
	kept := jobs[:0]
	for _, j := range jobs {
		j.newText, j.oldText = texts[j.newID], texts[j.oldID]
		if j.lexer == nil && j.byContent {
			text := j.newText
			if text == nil {
				text = j.oldText
			}
			j.lexer = lexerByContent(text)
			rememberBlobLexer(j.newID, j.oldID, j.lexer)
		}
		if j.lexer != nil {
			kept = append(kept, j)
		}
	}
	highlightAll(kept)
}

// blobID is a diff's blob id, "" for an absent side (git's zeros).
func blobID(id string) string {
	if strings.Trim(id, "0") == "" {
		return ""
	}
	return id
}

// hlJob is one file to highlight: its lexer, and its sides' blob ids and
// (when read) texts.
type hlJob struct {
	f                *FileView
	lexer            chroma.Lexer
	byContent        bool
	oldID, newID     string
	oldText, newText []byte
}

// highlightAll highlights the files on every CPU: lexing is most of a cold
// render's time, and the files are independent.
func highlightAll(jobs []hlJob) {
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	if workers <= 1 {
		for _, j := range jobs {
			highlightFile(j)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				highlightFile(jobs[i])
			}
		}()
	}
	wg.Wait()
}

// highlightFile gives every row of a file its tokens: from its side's
// whole-file tokens where there are some, else from its hunk's.
func highlightFile(j hlJob) {
	newWhole := wholeSpans(j.lexer, j.newID, j.newText)
	var oldWhole [][]Span
	if j.f.IsDelete || j.f.Deleted > 0 {
		oldWhole = wholeSpans(j.lexer, j.oldID, j.oldText)
	}
	for hi := range j.f.Hunks {
		highlightHunk(j.lexer, j.f.Hunks[hi].Rows, oldWhole, newWhole)
	}
}

// highlightHunk gives a hunk's rows their tokens. A side with whole-file
// tokens (oldWhole, newWhole: one entry a line) takes its lines' tokens
// from them; a side without is lexed as one text of the hunk's lines: the
// old side (context and deletions), the new side (context and additions).
func highlightHunk(l chroma.Lexer, rows []RowView, oldWhole, newWhole [][]Span) {
	var oldText, newText []string
	var oldRows, newRows []int
	deletions := false
	for i := range rows {
		r := &rows[i]
		deletions = deletions || r.IsDeletion
		if !r.IsAddition && oldWhole == nil {
			oldText, oldRows = append(oldText, r.Text), append(oldRows, i)
		}
		if !r.IsDeletion {
			if newWhole != nil {
				r.Hl = lineSpans(newWhole, r.New, r.Text)
			} else {
				newText, newRows = append(newText, r.Text), append(newRows, i)
			}
		}
		if r.IsDeletion && oldWhole != nil {
			r.Hl = lineSpans(oldWhole, r.Old, r.Text)
		}
	}
	for k, spans := range highlightLines(l, newText) {
		rows[newRows[k]].Hl = spans
	}
	if !deletions || oldWhole != nil {
		return
	}
	for k, spans := range highlightLines(l, oldText) {
		if r := &rows[oldRows[k]]; r.IsDeletion {
			r.Hl = spans
		}
	}
}

// fileHash is a short hash of a file's diff (paths and lines; the blob ids
// of a file shown without lines).
func fileHash(f api.File) string {
	h := fnv.New64a()
	h.Write([]byte(f.OldPath + "\x00" + f.NewPath + "\x00"))
	if f.TooLarge || f.IsBinary {
		h.Write([]byte(f.OldOID + "\x00" + f.NewOID + "\x00"))
	}
	for _, hk := range f.Hunks {
		for _, l := range hk.Lines {
			h.Write([]byte{byte(l.Kind)})
			h.Write([]byte(l.Text))
			h.Write([]byte{'\n'})
		}
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// pairRows stamps a hunk's lines for the split layout: each change block's
// deletions are zipped index-wise with its additions (the shorter side gets
// blank filler in the browser), and context lines sit in both panes.
func pairRows(lines []api.Line, prefix string) []RowView {
	rows := make([]RowView, 0, len(lines))
	pair := 0
	for i := 0; i < len(lines); {
		l := lines[i]
		if l.Kind == api.Context {
			rows = append(rows, RowView{IsContext: true, Old: l.Old, New: l.New, Text: l.Text, Cut: l.Cut, Side: "new", Line: l.New, Pair: fmt.Sprintf("%s-p%d", prefix, pair), Pane: "both"})
			pair++
			i++
			continue
		}
		// a change block: deletions then additions
		var dels, adds []api.Line
		for i < len(lines) && lines[i].Kind == api.Deleted {
			dels = append(dels, lines[i])
			i++
		}
		for i < len(lines) && lines[i].Kind == api.Added {
			adds = append(adds, lines[i])
			i++
		}
		first := len(rows)
		for k, dl := range dels {
			rows = append(rows, RowView{IsDeletion: true, Old: dl.Old, Text: dl.Text, Cut: dl.Cut, Side: "old", Line: dl.Old, Pair: fmt.Sprintf("%s-p%d", prefix, pair+k), Pane: "old"})
		}
		for k, al := range adds {
			rows = append(rows, RowView{IsAddition: true, New: al.New, Text: al.Text, Cut: al.Cut, Side: "new", Line: al.New, Pair: fmt.Sprintf("%s-p%d", prefix, pair+k), Pane: "new"})
		}
		// the k-th deletion and the k-th addition sit side by side: mark
		// the words that differ between them
		for k := 0; k < min(len(dels), len(adds)); k++ {
			d, a := &rows[first+k], &rows[first+len(dels)+k]
			d.Marks, a.Marks = wordDiff(d.Text, a.Text)
		}
		pair += max(len(dels), len(adds))
	}
	return rows
}

// BuildThread makes a thread's view, asking the review rules what the
// reviewer may do with each message.
func BuildThread(t review.Thread, taskID, csrf string) ThreadView {
	tv := ThreadView{TaskID: taskID, CSRF: csrf, ID: t.ID, File: t.File, Side: string(t.Side), Line: t.Line, StartLine: t.StartLine, LineText: t.LineText, Orphan: t.Orphan, FragID: FragID(t.File, string(t.Side), t.Line)}
	for i := range t.Messages {
		m := &t.Messages[i]
		mv := MessageView{ID: m.ID, Body: m.Body, IsAgent: !m.IsOwn(), IsAsk: m.Intent == review.Ask, IsWithdrawn: m.IsWithdrawn(), Error: m.AskError, At: m.CreatedAt}
		mv.HTML, mv.Suggestion = messageBody(m, taskID, csrf)
		if mv.IsAgent {
			mv.Actor = "Agent"
		} else {
			mv.Actor = "You"
		}
		switch {
		case mv.IsWithdrawn:
			mv.State, mv.StateClass = "withdrawn", "withdrawn"
		case mv.IsAgent:
			mv.State, mv.StateClass = "answer", "answer"
		case m.Intent == review.Ask:
			mv.State, mv.StateClass = map[review.AskState]string{review.AskPending: "waiting for the agent's answer", review.AskAnswered: "answered", review.AskFailed: "not answered"}[m.AskState], "ask-"+string(m.AskState)
		case m.DeliveryState == review.Delivered:
			mv.State, mv.StateClass = fmt.Sprintf("delivered with work turn %d", m.DeliveredTurn), "delivered"
			mv.DeliveredTurn = m.DeliveredTurn
		default:
			mv.State, mv.StateClass = "queued for the next unblock", "queued"
		}
		if !mv.IsAgent {
			if v := review.CanRetry(m, taskID); v.OK && !v.NoOp {
				mv.CanRetry = true
			}
			if v := review.CanWithdraw(m, taskID); v.OK {
				mv.CanWithdraw = true
			} else if !mv.IsWithdrawn {
				mv.WhyNoWithdraw = v.Reason
			}
		}
		tv.Messages = append(tv.Messages, mv)
	}
	tv.Settled = t.Settled()
	return tv
}

// Summary is the thread's one line when it is collapsed: its first words.
func (t ThreadView) Summary() string {
	if len(t.Messages) == 0 {
		return ""
	}
	s := t.Messages[0].Body
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 90 {
		s = string(r[:87]) + "..."
	}
	return s
}

// LinkTurns points each delivered comment at the commit its turn made (the
// newest one, when the turn made several).
func LinkTurns(d *DiffView, orphans []ThreadView, commits []CommitRow) {
	byTurn := map[int]*CommitRow{}
	for i := len(commits) - 1; i >= 0; i-- { // oldest first: the newest wins
		if commits[i].Turn != 0 {
			byTurn[commits[i].Turn] = &commits[i]
		}
	}
	link := func(ts []ThreadView) {
		for i := range ts {
			for j := range ts[i].Messages {
				m := &ts[i].Messages[j]
				if m.DeliveredTurn != 0 {
					m.TurnCommit = byTurn[m.DeliveredTurn]
				}
			}
		}
	}
	for fi := range d.Files {
		for hi := range d.Files[fi].Hunks {
			for ri := range d.Files[fi].Hunks[hi].Rows {
				link(d.Files[fi].Hunks[hi].Rows[ri].Threads)
			}
		}
	}
	link(orphans)
}

// sideLines are one side of one file's diff: line number → text.
type sideLines map[int]string

// indexLines indexes every diff line by file and side ("path\x00side").
func indexLines(files []api.File) map[string]sideLines {
	out := map[string]sideLines{}
	add := func(path, side string, n int, text string) {
		k := path + "\x00" + side
		if out[k] == nil {
			out[k] = sideLines{}
		}
		out[k][n] = text
	}
	for _, f := range files {
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				if l.Kind != api.Added && f.OldPath != "" {
					add(f.OldPath, "old", l.Old, l.Text)
				}
				if l.Kind != api.Added {
					add(f.Path(), "old", l.Old, l.Text)
				}
				if l.Kind != api.Deleted {
					add(f.Path(), "new", l.New, l.Text)
				}
			}
		}
	}
	return out
}

// placeThread anchors a thread in the diff as it is now, the way Gerrit
// ports comments: on its line when that line still holds the text it was
// made on; else on the nearest line of the same file and side that holds
// that text (PortedFrom says where it was); else on its line marked
// Outdated, when the line is in the diff at all. It reports false when the
// thread has no place in the diff (an orphan).
func placeThread(tv *ThreadView, lines map[string]sideLines) bool {
	side := lines[tv.File+"\x00"+tv.Side]
	text, here := side[tv.Line]
	if here && (tv.LineText == "" || text == tv.LineText) {
		return true
	}
	if tv.LineText != "" {
		best := 0
		for n, t := range side {
			if t == tv.LineText && (best == 0 || abs(n-tv.Line) < abs(best-tv.Line) || abs(n-tv.Line) == abs(best-tv.Line) && n < best) {
				best = n
			}
		}
		if best != 0 {
			if tv.StartLine > 0 { // a range moves with its last line
				tv.StartLine = max(1, tv.StartLine+best-tv.Line)
			}
			tv.PortedFrom, tv.Line = tv.Line, best
			tv.FragID = FragID(tv.File, tv.Side, best)
			return true
		}
	}
	if here {
		tv.Outdated = true
		return true
	}
	tv.Outdated = tv.LineText != ""
	return false
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// linkTarget is a symbolic link's target as its diff holds it: the text of
// its new side (the old one for a deleted link). It is only text.
func linkTarget(f api.File) string {
	want := api.Added
	if f.IsDelete || f.NewMode != api.ModeSymlink {
		want = api.Deleted
	}
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			if l.Kind == want {
				return l.Text
			}
		}
	}
	return ""
}

// A change is one thing a file's diff says besides its lines; the page marks
// each with data-change="<Kind>".
type Change struct{ Kind, Text string }

// Changes is what changed in f besides its lines, in the words of the
// file's header: its mode, its name, a binary file's sizes, an empty file,
// a symbolic link's target.
func (f *FileView) Changes() []Change {
	var out []Change
	if f.IsRename {
		t := "renamed from " + f.OldPath
		if f.Similarity > 0 && f.Similarity < 100 {
			t += " (" + strconv.Itoa(f.Similarity) + "% similar)"
		}
		out = append(out, Change{"rename", t})
	}
	if f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode {
		t := "mode " + f.OldMode + " → " + f.NewMode
		switch {
		case f.NewMode == "100755" && f.OldMode == "100644":
			t += " (made executable)"
		case f.NewMode == "100644" && f.OldMode == "100755":
			t += " (no longer executable)"
		}
		out = append(out, Change{"mode", t})
	}
	if f.IsSymlink {
		t := "symbolic link → " + f.LinkTarget
		switch {
		case f.OldMode == api.ModeSymlink && f.NewMode != api.ModeSymlink && !f.IsDelete:
			t = "symbolic link to " + f.LinkTarget + " replaced by a file"
		case f.IsDelete:
			t = "symbolic link removed (was → " + f.LinkTarget + ")"
		}
		out = append(out, Change{"symlink", t})
	}
	if f.IsBinary {
		out = append(out, Change{"binary", "binary file" + f.sizes()})
	}
	if f.IsEmpty {
		t := "empty file added"
		if f.IsDelete {
			t = "empty file removed"
		}
		out = append(out, Change{"empty", t})
	}
	return out
}

// sizes is ": <old> → <new>" of a binary file, as far as it is known.
func (f *FileView) sizes() string {
	switch {
	case f.IsNew && f.NewSize > 0:
		return ": " + ByteSize(f.NewSize)
	case f.IsDelete && f.OldSize > 0:
		return ": " + ByteSize(f.OldSize)
	case f.OldSize > 0 && f.NewSize > 0:
		return ": " + ByteSize(f.OldSize) + " → " + ByteSize(f.NewSize)
	}
	return ""
}

// ByteSize is n bytes as a reader reads them: "912 B", "12.3 KB", "4.0 MB".
func ByteSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n)/1024, "KB"
	for _, u := range []string{"MB", "GB", "TB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + unit
}
