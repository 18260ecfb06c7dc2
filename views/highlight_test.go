package views

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazy/gitx"
)

// diffRepo commits before, then after (path → text; "" deletes), in a new
// repository, and returns the view of the diff between them with its
// Sources read from the repository as the daemon reads them.
func diffRepo(t *testing.T, before, after map[string]string) DiffView {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	git := func(args ...string) {
		t.Helper()
		if _, err := gitx.Run(ctx, dir, append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...); err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
	}
	commit := func(files map[string]string) {
		for p, text := range files {
			if text == "" {
				_ = os.Remove(filepath.Join(dir, p))
				continue
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git("add", "-A")
		git("commit", "-q", "--allow-empty", "-m", "c")
	}
	git("init", "-q")
	commit(before)
	commit(after)
	d, err := gitx.DiffWith(ctx, dir, gitx.DiffSpec{From: "HEAD~1", To: "HEAD"})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := BuildDiff(d.Files, nil, "t1", "", false, "")
	v.Sources = func(ids []string) map[string][]byte {
		out, err := gitx.ReadBlobs(ctx, dir, ids, MaxWholeBytes, 16<<20)
		if err != nil {
			t.Errorf("read blobs: %v", err)
		}
		return out
	}
	return v
}

// rowOf is the row of path whose text is text.
func rowOf(t *testing.T, v DiffView, path, text string) RowView {
	t.Helper()
	for _, f := range v.Files {
		if f.Path != path {
			continue
		}
		for _, h := range f.Hunks {
			for _, r := range h.Rows {
				if r.Text == text {
					return r
				}
			}
		}
	}
	t.Fatalf("no row %q in %s", text, path)
	return RowView{}
}

// classes are the token classes of a row's text, in order.
func classes(r RowView) []string {
	var out []string
	for _, s := range r.Hl {
		out = append(out, r.Text[s.Start:s.End]+"="+s.Class)
	}
	return out
}

// allOf reports whether the row has tokens and every one's class starts
// with prefix (s: a string, c: a comment).
func allOf(r RowView, prefix string) bool {
	if len(r.Hl) == 0 {
		return false
	}
	for _, s := range r.Hl {
		if !strings.HasPrefix(s.Class, prefix) {
			return false
		}
	}
	return true
}

func hasClass(r RowView, class string) bool {
	for _, s := range r.Hl {
		if s.Class == class {
			return true
		}
	}
	return false
}

func lines(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(prefix + strings.Repeat("x", i+1) + "\n")
	}
	return b.String()
}

// TestHighlightWholeFile: a hunk that starts inside a Go raw string holding
// SQL is coloured as a string, and one inside a /* */ block as a comment —
// the file is lexed whole and sliced to the hunks. Lexed hunk by hunk (no
// sources), the same lines read as Go keywords: what this replaces.
func TestHighlightWholeFile(t *testing.T) {
	sqlBefore := "package q\n\nconst query = `\n" + lines("  and col_", 6) + "  select name from users\n" + lines("  or col_", 6) + "`\n"
	sqlAfter := strings.Replace(sqlBefore, "  select name from users\n", "  select id, name from users where id = 1\n", 1)
	docBefore := "package q\n\n/*\n" + lines("Prose ", 6) + "for the first one, return it\n" + lines("More ", 6) + "*/\nfunc F() {}\n"
	docAfter := strings.Replace(docBefore, "for the first one, return it\n", "if the range is empty, return nil for the caller\n", 1)
	before := map[string]string{"q/sql.go": sqlBefore, "q/doc.go": docBefore}
	after := map[string]string{"q/sql.go": sqlAfter, "q/doc.go": docAfter}

	ForgetHighlights()
	hunky := diffRepo(t, before, after)
	hunky.Sources = nil
	HighlightFiles(&hunky, nil)
	if r := rowOf(t, hunky, "q/sql.go", "  select id, name from users where id = 1"); !hasClass(r, "k") {
		t.Errorf("lexed by the hunk the SQL line should read as Go (the case this fixes), got %v", classes(r))
	}

	ForgetHighlights()
	v := diffRepo(t, before, after)
	HighlightFiles(&v, nil)
	for _, c := range []struct{ path, text, prefix, what string }{
		{"q/sql.go", "  select id, name from users where id = 1", "s", "string"},
		{"q/sql.go", "  select name from users", "s", "string"},
		{"q/sql.go", "  and col_xxxxxx", "s", "string"},
		{"q/doc.go", "if the range is empty, return nil for the caller", "c", "comment"},
		{"q/doc.go", "for the first one, return it", "c", "comment"},
	} {
		if r := rowOf(t, v, c.path, c.text); !allOf(r, c.prefix) {
			t.Errorf("%s: %q: got %v, want all of it a %s", c.path, c.text, classes(r), c.what)
		}
	}

	// rendered again, the tokens come from the cache by blob id: the
	// sources are not read
	again := diffRepo(t, before, after)
	again.Sources = func(ids []string) map[string][]byte {
		t.Errorf("blobs %v read again: the whole-file tokens should be cached by blob id", ids)
		return nil
	}
	HighlightFiles(&again, nil)
	if r := rowOf(t, again, "q/sql.go", "  select name from users"); !allOf(r, "s") {
		t.Errorf("cached: got %v, want a string", classes(r))
	}
}

// TestHighlightByShebang: a file without an extension is highlighted by
// its shebang's interpreter.
func TestHighlightByShebang(t *testing.T) {
	ForgetHighlights()
	v := diffRepo(t, map[string]string{"README.md": "x\n"}, map[string]string{
		"bin/tool":  "#!/usr/bin/env python3\nimport os\n\ndef main():\n    return os.getcwd()\n",
		"bin/setup": "#!/bin/sh\nset -e\nif [ -z \"$X\" ]; then echo none; fi\n",
		"NOTES":     "just some words\nof prose\n",
	})
	HighlightFiles(&v, nil)
	if r := rowOf(t, v, "bin/tool", "def main():"); !hasClass(r, "k") || !hasClass(r, "nf") {
		t.Errorf("python shebang: got %v, want def a keyword and main a function name", classes(r))
	}
	if r := rowOf(t, v, "bin/tool", "import os"); !hasClass(r, "kn") {
		t.Errorf("python shebang: got %v, want import a namespace keyword", classes(r))
	}
	if r := rowOf(t, v, "bin/setup", `if [ -z "$X" ]; then echo none; fi`); !hasClass(r, "k") {
		t.Errorf("sh shebang: got %v, want if/then keywords", classes(r))
	}
	if r := rowOf(t, v, "NOTES", "just some words"); len(r.Hl) != 0 {
		t.Errorf("prose without a shebang: got %v, want it plain", classes(r))
	}
}

func TestLexerByContent(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"#!/usr/bin/env python3\n", "Python"},
		{"#!/usr/bin/python3.11 -u\n", "Python"},
		{"#!/bin/sh\n", "Bash"},
		{"#!/usr/bin/env -S node --flag\n", "JavaScript"},
		{"#!/usr/bin/env perl\n", "Perl"},
		{"plain words\n", ""},
		{"", ""},
	} {
		got := ""
		if l := lexerByContent([]byte(c.text)); l != nil {
			got = l.Config().Name
		}
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.text, got, c.want)
		}
	}
}
