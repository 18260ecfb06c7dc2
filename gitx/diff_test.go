package gitx

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"lazy/gitx/gitxtest"
)

// gitdiffParse is how diffs were read before ReadDiff (whole, by
// go-gitdiff): ReadDiff must read every diff within its limits the same way.
func gitdiffParse(t *testing.T, text []byte) []File {
	t.Helper()
	files, _, err := gitdiff.Parse(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	out := []File{}
	for _, f := range files {
		fl := File{OldPath: f.OldName, NewPath: f.NewName, IsNew: f.IsNew, IsDelete: f.IsDelete, IsRename: f.IsRename, IsBinary: f.IsBinary, OldOID: f.OldOIDPrefix, NewOID: f.NewOIDPrefix, Similarity: f.Score}
		fl.OldMode, fl.NewMode = modes(f)
		for _, frag := range f.TextFragments {
			h := Hunk{OldStart: int(frag.OldPosition), OldLines: int(frag.OldLines), NewStart: int(frag.NewPosition), NewLines: int(frag.NewLines), Section: frag.Comment}
			old, nw := int(frag.OldPosition), int(frag.NewPosition)
			for _, l := range frag.Lines {
				ln := Line{Text: strings.TrimSuffix(l.Line, "\n"), NoEOL: l.NoEOL()}
				switch l.Op {
				case gitdiff.OpContext:
					ln.Kind, ln.Old, ln.New = Context, old, nw
					old, nw = old+1, nw+1
				case gitdiff.OpDelete:
					ln.Kind, ln.Old = Deleted, old
					old++
					fl.Deleted++
				case gitdiff.OpAdd:
					ln.Kind, ln.New = Added, nw
					nw++
					fl.Added++
				}
				h.Lines = append(h.Lines, ln)
			}
			fl.Hunks = append(fl.Hunks, h)
		}
		out = append(out, fl)
	}
	return out
}

// TestReadDiffMatchesGitdiff: on a real diff with renames, deletions, a
// mode change, a binary file, quoted names, lines that look like headers
// and a missing final newline, ReadDiff reads what go-gitdiff reads.
func TestReadDiffMatchesGitdiff(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("word ", 200)
	root := gitxtest.NewRepo(t, map[string]string{
		"a.go":         "package a\n\nfunc A() {\n\treturn\n}\n" + strings.Repeat("// filler\n", 30) + "func B() {}\n",
		"gone.txt":     "bye\n",
		"old name.txt": long + "\nsecond\n",
		"mode.sh":      "echo hi\n",
		"dashes.txt":   "-- one\n++ two\nthree\n",
	})
	gitxtest.Git(t, root, "checkout", "-q", "-b", "task")
	gitxtest.Git(t, root, "mv", "old name.txt", "new\tname ü.txt")
	gitxtest.Git(t, root, "rm", "-q", "gone.txt")
	if err := os.Chmod(filepath.Join(root, "mode.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitxtest.Commit(t, root, "change", map[string]string{
		"a.go":       "package a\n\nfunc A() {\n\treturn 1\n}\n" + strings.Repeat("// filler\n", 30) + "func B() { x() }",
		"dashes.txt": "--- one\n+++ two\nthree\n",
		"bin.dat":    "\x00\x01\x02binary",
		"new.txt":    "hi\n",
	})
	raw, err := RunRaw(ctx, root, "diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", "--src-prefix=a/", "--dst-prefix=b/", "main...task")
	if err != nil {
		t.Fatal(err)
	}
	d, err := DiffWith(ctx, root, DiffSpec{From: "main", To: "task", MergeBase: true})
	if err != nil {
		t.Fatal(err)
	}
	want := gitdiffParse(t, raw)
	for i := range d.Files { // sizes come from the blobs (TestDiffKinds)
		d.Files[i].OldSize, d.Files[i].NewSize = 0, 0
	}
	if len(want) != 7 {
		t.Fatalf("the fixture's diff has %d files, want 7:\n%s", len(want), raw)
	}
	if !reflect.DeepEqual(d.Files, want) {
		for i := range want {
			if i < len(d.Files) && !reflect.DeepEqual(d.Files[i], want[i]) {
				t.Errorf("file %d:\n got %+v\nwant %+v", i, d.Files[i], want[i])
			}
		}
		t.Fatalf("ReadDiff read %d files, go-gitdiff %d", len(d.Files), len(want))
	}
}

// TestReadDiffLimits: a long line is cut at a character's edge and says its
// length; a file past a file's limits, and the files past the diff's
// budget, keep their counts and no lines; a file after them is read whole.
func TestReadDiffLimits(t *testing.T) {
	var b strings.Builder
	file := func(name string, lines []string) {
		fmt.Fprintf(&b, "diff --git a/%s b/%s\nnew file mode 100644\nindex 0000000..1234567\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", name, name, name, len(lines))
		for _, l := range lines {
			b.WriteString("+" + l + "\n")
		}
	}
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("line %d", i)
		}
		return out
	}
	longLine := strings.Repeat("é", MaxLineBytes) // 2 bytes each: twice the limit
	file("long.txt", []string{"short", longLine})
	file("big.txt", many(MaxFileDiffLines+1))
	file("wide.txt", []string{strings.Repeat("x", MaxFileDiffBytes)})
	// four files of 15,000 lines: the budget of MaxDiffLines keeps three
	for i := 0; i < 4; i++ {
		file(fmt.Sprintf("part%d.txt", i), many(15_000))
	}
	file("after.txt", []string{"fine"})
	d, err := ParseDiff([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range d.Files {
		got[f.Path()] = f
	}
	lg := got["long.txt"].Hunks[0].Lines[1]
	if lg.Cut != len(longLine) || len(lg.Text) > MaxLineBytes || !utf8.ValidString(lg.Text) || !strings.HasPrefix(longLine, lg.Text) {
		t.Errorf("long line: got Cut %d, %d bytes of text (valid UTF-8 %v); want Cut %d, at most %d bytes", lg.Cut, len(lg.Text), utf8.ValidString(lg.Text), len(longLine), MaxLineBytes)
	}
	if s := got["long.txt"].Hunks[0].Lines[0]; s.Cut != 0 || s.Text != "short" {
		t.Errorf("short line: got %+v", s)
	}
	for name, tooLarge := range map[string]bool{"big.txt": true, "wide.txt": true, "part0.txt": false, "part2.txt": false, "part3.txt": true, "after.txt": false} {
		f := got[name]
		if f.TooLarge != tooLarge || (f.TooLarge && f.Hunks != nil) || (!f.TooLarge && len(f.Hunks) != 1) {
			t.Errorf("%s: got TooLarge %v with %d hunks, want TooLarge %v", name, f.TooLarge, len(f.Hunks), tooLarge)
		}
	}
	if f := got["big.txt"]; f.Added != MaxFileDiffLines+1 || f.NewOID != "1234567" {
		t.Errorf("big.txt: got %d added, blob %q; want %d, 1234567", f.Added, f.NewOID, MaxFileDiffLines+1)
	}
}
