package views

import (
	"html"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/chroma/v2/lexers"
)

func marked(s string, spans []Span) string {
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.Start] + "[" + s[sp.Start:sp.End] + "]")
		last = sp.End
	}
	return b.String() + s[last:]
}

func TestWordDiff(t *testing.T) {
	for _, tc := range []struct{ old, new, wantOld, wantNew string }{
		{"func f(ctx context.Context) error {", "func f(rctx context.Context) error {", "func f([ctx] context.Context) error {", "func f([rctx] context.Context) error {"},
		{"x := alpha + beta", "x := alpha - gamma", "x := alpha [+ beta]", "x := alpha [- gamma]"},
		{"return 1", "return 1 // done", "return 1", "return 1[ // done]"},
		{"completely different", "nothing alike at all here", "completely different", "nothing alike at all here"}, // rewritten: no marks
		{"same", "same", "same", "same"},
		{"naïve café", "naïve cafe", "naïve [café]", "naïve [cafe]"},
	} {
		o, n := wordDiff(tc.old, tc.new)
		if got := marked(tc.old, o); got != tc.wantOld {
			t.Errorf("old %q: %q, want %q", tc.old, got, tc.wantOld)
		}
		if got := marked(tc.new, n); got != tc.wantNew {
			t.Errorf("new %q: %q, want %q", tc.new, got, tc.wantNew)
		}
	}
}

func TestWriteTextEscapesAndNests(t *testing.T) {
	var b strings.Builder
	text := `if a < b { s := "<x>" }`
	hl := []Span{{0, 2, "k"}, {16, 21, "s"}}
	marks := []Span{{Start: 14, End: 21}}
	writeText(&b, text, hl, marks, "ins")
	got := b.String()
	if strings.Contains(got, "<x>") || !strings.Contains(got, `<span class="s">&#34;&lt;x&gt;&#34;</span>`) || strings.Count(got, "<ins>") != 1 {
		t.Fatalf("writeText: %s", got)
	}
}

func TestHighlightLines(t *testing.T) {
	l := lexerFor("a.go")
	if l == nil {
		t.Fatal("no lexer for Go")
	}
	lines := []string{"/* a comment", "   over two lines */", `func main() { s := "x" }`}
	spans := highlightLines(l, lines)
	if len(spans) != 3 || len(spans[1]) == 0 || !strings.HasPrefix(spans[1][0].Class, "c") {
		t.Fatalf("the comment's second line is not a comment: %+v", spans)
	}
	var kw bool
	for _, sp := range spans[2] {
		if lines[2][sp.Start:sp.End] == "func" && strings.HasPrefix(sp.Class, "k") {
			kw = true
		}
		if sp.End > len(lines[2]) {
			t.Fatalf("span past the line: %+v", sp)
		}
	}
	if !kw {
		t.Fatalf("func is no keyword: %+v", spans[2])
	}
	if lexerFor("notes.unknownext") != nil {
		t.Fatal("a lexer for an unknown file type")
	}
	if !strings.Contains(HighlightCSS(), ".text .k {") {
		t.Fatal("no keyword colour in the stylesheet")
	}
}

// TestLexerForMatchesChroma: the per-extension shortcut picks what chroma's
// own Match picks.
func TestLexerForMatchesChroma(t *testing.T) {
	for _, name := range []string{"a.go", "dir/b.go", "x_test.go", "Makefile", "CMakeLists.txt", "notes.txt", "a.py", "Dockerfile", "b.js", "c.ts", "d.tsx", "e.yaml", "f.yml", "g.json", "h.rs", "i.c", "j.h", "k.md", "go.mod", "a.go.orig", "x.unknown", "noext", ".bashrc", "a.sh", "a.html", "b.css", "c.toml", "d.sql"} {
		got, want := lexerFor(name), lexers.Match(filepath.Base(name))
		gn, wn := "", ""
		if got != nil {
			gn = got.Config().Name
		}
		if want != nil {
			wn = want.Config().Name
		}
		if gn != wn {
			t.Errorf("%s: %q, chroma says %q", name, gn, wn)
		}
	}
}

// FuzzRenderLine: whatever text an agent writes on a replaced line, its
// rendering with tokens and changed words is escaped (only our own tags),
// keeps every character, and the marks lie within the line.
func FuzzRenderLine(f *testing.F) {
	f.Add("func f(ctx context.Context) error {", "func f(rctx context.Context) error {", "a.go")
	f.Add(`<script>alert("x")</script>`, `<script>alert('y')</script>`, "a.html")
	f.Add("naïve café \xff\xfe", "naïve cafe \x00", "b.py")
	f.Fuzz(func(t *testing.T, old, new, path string) {
		if len(old) > 2000 || len(new) > 2000 {
			return
		}
		om, nm := wordDiff(old, new)
		for _, ms := range [][]Span{om, nm} {
			for _, m := range ms {
				if m.Start < 0 || m.End < m.Start {
					t.Fatalf("bad mark %+v", m)
				}
			}
		}
		for _, c := range []struct {
			text  string
			marks []Span
			tag   string
		}{{old, om, "del"}, {new, nm, "ins"}} {
			hl := highlightLines(lexerFor(path), []string{c.text})[0]
			var b strings.Builder
			writeText(&b, c.text, hl, c.marks, c.tag)
			out := b.String()
			stripped := out
			for _, tag := range []string{"<" + c.tag + ">", "</" + c.tag + ">", "</span>"} {
				stripped = strings.ReplaceAll(stripped, tag, "")
			}
			for strings.Contains(stripped, `<span class="`) {
				i := strings.Index(stripped, `<span class="`)
				j := strings.Index(stripped[i:], `">`)
				if j < 0 {
					t.Fatalf("unclosed span tag in %q", out)
				}
				stripped = stripped[:i] + stripped[i+j+2:]
			}
			if strings.ContainsAny(stripped, "<>") {
				t.Fatalf("unescaped markup in %q", out)
			}
			if got := html.UnescapeString(stripped); got != strings.ToValidUTF8(c.text, "\uFFFD") && got != c.text {
				t.Fatalf("text changed: %q → %q", c.text, got)
			}
		}
	})
}
