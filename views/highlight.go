package views

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
)

// Span is a byte range of a line's text: a highlighted token (Class set)
// or a changed word run (Class empty).
type Span struct {
	Start, End int
	Class      string
}

// Highlighted tokens carry chroma's short class names (k, nf, s2, ...);
// HighlightCSS scopes them to a line's text, so they meet no rule of the
// page's own.

// highlightStyle is the colour scheme of highlighted code.
const highlightStyle = "github"

// maxHighlightBytes bounds the text of one hunk side given to the lexer; a
// larger one is shown plain (a generated or minified file).
const maxHighlightBytes = 256 << 10

// lexerFor picks the lexer of a file by its name; nil when there is none
// (the file is shown plain). chroma's own Match tries every glob of every
// lexer (about 3 ms a name), so names are matched once per extension: a name
// whose extension some lexer claims as "*.ext", and that no other kind of
// glob matches, gets that extension's lexer.
func lexerFor(path string) chroma.Lexer {
	base := filepath.Base(path)
	key := base
	if ext := filepath.Ext(base); ext != "" && lexIndex().exts[ext] && !lexIndex().special(base) {
		key = "*" + ext
	}
	if l, ok := lexCache.Load(key); ok {
		return l.(cachedLexer).l
	}
	name := base
	if key != base {
		name = "lazy-probe" + key[1:]
	}
	var l chroma.Lexer
	if m := lexers.Match(name); m != nil {
		l = chroma.Coalesce(m)
	}
	lexCache.Store(key, cachedLexer{l})
	return l
}

type cachedLexer struct{ l chroma.Lexer }

var lexCache sync.Map // name or *.ext → cachedLexer

type lexerIndex struct {
	exts  map[string]bool // extensions some lexer claims as "*.ext"
	globs []string        // every other file name glob
}

// special reports whether a glob other than "*.ext" matches name.
func (x *lexerIndex) special(name string) bool {
	for _, g := range x.globs {
		if ok, _ := filepath.Match(g, name); ok {
			return true
		}
	}
	return false
}

var lexIndex = sync.OnceValue(func() *lexerIndex {
	x := &lexerIndex{exts: map[string]bool{}}
	for _, l := range lexers.GlobalLexerRegistry.Lexers {
		c := l.Config()
		for _, g := range append(append([]string(nil), c.Filenames...), c.AliasFilenames...) {
			if strings.HasPrefix(g, "*.") && !strings.ContainsAny(g[2:], "*?[\\") {
				x.exts[g[1:]] = true
			} else {
				x.globs = append(x.globs, g)
			}
		}
	}
	return x
})

// highlightLines lexes lines as one text (so a construct spanning lines is
// read right) and returns each line's token spans. Tokens the scheme does not
// colour are left out. Any failure leaves the lines plain.
func highlightLines(l chroma.Lexer, lines []string) [][]Span {
	if l == nil || len(lines) == 0 {
		return make([][]Span, len(lines))
	}
	size := 0
	for _, s := range lines {
		size += len(s) + 1
	}
	if size > maxHighlightBytes {
		return make([][]Span, len(lines))
	}
	var b strings.Builder
	b.Grow(size)
	for _, s := range lines {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	text := b.String()
	key := hlKey{lexer: l.Config().Name, sum: fnvString(text), size: len(text)}
	if out, ok := hlCache.get(key); ok && len(out) == len(lines) {
		return out
	}
	out := tokenLines(l, text, lines)
	hlCache.put(key, out, len(text))
	return out
}

// tokenLines lexes text (lines joined by newlines) into each line's spans.
func tokenLines(l chroma.Lexer, text string, lines []string) [][]Span {
	out := make([][]Span, len(lines))
	it, err := l.Tokenise(nil, text)
	if err != nil {
		return out
	}
	line, col := 0, 0
	for tok := it(); tok != chroma.EOF; tok = it() {
		class := classOf(tok.Type)
		v := tok.Value
		for len(v) > 0 && line < len(lines) {
			nl := strings.IndexByte(v, '\n')
			part := v
			if nl >= 0 {
				part = v[:nl]
			}
			if class != "" && part != "" {
				// a lexer that ends a text without the final newline, or
				// drops characters, must not push a span past its line
				end := min(col+len(part), len(lines[line]))
				if col < end {
					out[line] = append(out[line], Span{Start: col, End: end, Class: class})
				}
			}
			col += len(part)
			if nl < 0 {
				break
			}
			line, col, v = line+1, 0, v[nl+1:]
		}
	}
	return out
}

var (
	classMu    sync.RWMutex
	classCache = map[chroma.TokenType]string{}
)

// classOf is the CSS class of a token type: its own, else its sub-category's,
// else its category's, among those the scheme colours; "" for none.
func classOf(t chroma.TokenType) string {
	classMu.RLock()
	c, ok := classCache[t]
	classMu.RUnlock()
	if ok {
		return c
	}
	for _, tt := range []chroma.TokenType{t, t.SubCategory(), t.Category()} {
		if short, ok := chroma.StandardTypes[tt]; ok && short != "" && styled()[short] {
			c = short
			break
		}
	}
	classMu.Lock()
	classCache[t] = c
	classMu.Unlock()
	return c
}

var (
	styleOnce sync.Once
	styleCSS  string
	styleSet  map[string]bool
)

// styled is the set of short classes the scheme gives a colour or a weight.
func styled() map[string]bool {
	styleOnce.Do(buildStyle)
	return styleSet
}

// HighlightCSS is the stylesheet of highlighted tokens: colour, weight and
// slant only, so the diff's own backgrounds show through.
func HighlightCSS() string {
	styleOnce.Do(buildStyle)
	return styleCSS
}

// darkStyle is the colour scheme of highlighted code when the system
// prefers dark (prefers-color-scheme).
const darkStyle = "github-dark"

// tokenLook is what a scheme gives one token type beyond its plain text.
type tokenLook struct {
	colour       string // "" when the plain text's
	bold, italic bool
}

// schemeLooks is each short class's look in the named chroma style, for
// the types it gives a colour other than its plain text's, a weight or a
// slant.
func schemeLooks(name string) map[string]tokenLook {
	st := styles.Get(name)
	// the scheme's plain text colour is the page's: no span for it. Where
	// the scheme leaves Text unset, plain is the colour most types share.
	plain := st.Get(chroma.Text).Colour
	if !plain.IsSet() {
		count := map[chroma.Colour]int{}
		for tt := range chroma.StandardTypes {
			if c := st.Get(tt).Colour; c.IsSet() {
				count[c]++
			}
		}
		for c, n := range count {
			if n > count[plain] || n == count[plain] && c < plain {
				plain = c
			}
		}
	}
	looks := map[string]tokenLook{}
	for tt, short := range chroma.StandardTypes {
		// white space gets no class: a span per run of spaces is weight
		// and shows nothing
		if short == "" || tt == chroma.Background || tt == chroma.Text || tt == chroma.TextWhitespace {
			continue
		}
		e := st.Get(tt)
		var l tokenLook
		if e.Colour.IsSet() && e.Colour != plain {
			l.colour = e.Colour.String()
		}
		l.bold, l.italic = e.Bold == chroma.Yes, e.Italic == chroma.Yes
		if l != (tokenLook{}) {
			looks[short] = l
		}
	}
	return looks
}

// buildStyle writes the light scheme's rules, then the dark scheme's inside
// a prefers-color-scheme query. A class styled in either scheme gets its
// span; the dark rules set every such class's colour, weight and slant, so
// none of the light scheme's shows through.
func buildStyle() {
	light, dark := schemeLooks(highlightStyle), schemeLooks(darkStyle)
	styleSet = map[string]bool{}
	for short := range light {
		styleSet[short] = true
	}
	for short := range dark {
		styleSet[short] = true
	}
	var lightRules, darkRules []string
	for short := range styleSet {
		if l, ok := light[short]; ok {
			lightRules = append(lightRules, fmt.Sprintf(".text .%s { %s; }", short, strings.Join(l.decls(false), "; ")))
		}
		darkRules = append(darkRules, fmt.Sprintf("  .text .%s { %s; }", short, strings.Join(dark[short].decls(true), "; ")))
	}
	sort.Strings(lightRules)
	sort.Strings(darkRules)
	styleCSS = "/* highlighted code (chroma, style " + highlightStyle + "; " + darkStyle + " when the system prefers dark) */\n" +
		strings.Join(lightRules, "\n") + "\n@media (prefers-color-scheme: dark) {\n" + strings.Join(darkRules, "\n") + "\n}\n"
}

// decls is the look as CSS declarations; whole also resets what the look
// leaves plain (a rule overriding another scheme's).
func (l tokenLook) decls(whole bool) []string {
	var d []string
	switch {
	case l.colour != "":
		d = append(d, "color:"+l.colour)
	case whole:
		d = append(d, "color:inherit")
	}
	switch {
	case l.bold:
		d = append(d, "font-weight:600")
	case whole:
		d = append(d, "font-weight:inherit")
	}
	switch {
	case l.italic:
		d = append(d, "font-style:italic")
	case whole:
		d = append(d, "font-style:inherit")
	}
	return d
}

// hlKey names one lexed text: the lexer, and the text's hash and length
// (a hunk side), or its blob id (a whole file).
type hlKey struct {
	lexer string
	sum   uint64
	size  int
	blob  string
}

func fnvString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// hlCacheEntries and hlCacheBytes bound the highlight cache (hunk sides,
// and the length of the texts they lexed: the spans kept grow with it); the
// oldest entry leaves first. A review page re-rendered (a reload, a new
// thread) lexes nothing it lexed before.
const (
	hlCacheEntries = 8192
	hlCacheBytes   = 32 << 20
)

var hlCache = &spanCache{m: map[hlKey]spanEntry{}}

// spanCache remembers lexed texts, first in, first out.
type spanCache struct {
	mu    sync.Mutex
	m     map[hlKey]spanEntry
	order []hlKey
	size  int // the sum of the entries' text lengths
}

type spanEntry struct {
	spans [][]Span
	size  int // the length of the text lexed
}

func (c *spanCache) get(k hlKey) ([][]Span, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v.spans, ok
}

func (c *spanCache) has(k hlKey) bool {
	_, ok := c.get(k)
	return ok
}

func (c *spanCache) put(k hlKey, v [][]Span, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	for len(c.order) > 0 && (len(c.order) >= hlCacheEntries || c.size+size > hlCacheBytes) {
		c.size -= c.m[c.order[0]].size
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = spanEntry{v, size}
	c.order = append(c.order, k)
	c.size += size
}

// ForgetHighlights empties the highlight cache: the next render lexes
// everything again (a cold render, as benchmarks measure it).
func ForgetHighlights() {
	hlCache.mu.Lock()
	defer hlCache.mu.Unlock()
	hlCache.m, hlCache.order, hlCache.size = map[hlKey]spanEntry{}, nil, 0
}

// MaxWholeBytes bounds a blob lexed whole: a larger file is lexed hunk by
// hunk (its hunks may then start inside a string). The daemon reads no
// larger blob for a page.
const MaxWholeBytes = 512 << 10

// wholeKey names the tokens of blob id lexed whole by l.
func wholeKey(l chroma.Lexer, id string) hlKey {
	return hlKey{lexer: l.Config().Name, blob: id}
}

// wholeSpans are the tokens of each line of blob id (the text given, or
// cached by id): nil when neither is at hand or the text is too large.
func wholeSpans(l chroma.Lexer, id string, text []byte) [][]Span {
	if id == "" {
		return nil
	}
	key := wholeKey(l, id)
	if out, ok := hlCache.get(key); ok {
		return out
	}
	if text == nil || len(text) > MaxWholeBytes {
		return nil
	}
	s := string(text)
	out := tokenLines(l, s, strings.Split(s, "\n"))
	hlCache.put(key, out, len(s))
	return out
}

// lineSpans are line n's tokens (1-based) of a whole file, cut to the
// length of the line as the diff holds it (a cut line holds its start).
func lineSpans(whole [][]Span, n int, text string) []Span {
	if n < 1 || n > len(whole) {
		return nil
	}
	spans := whole[n-1]
	for i, sp := range spans {
		if sp.End > len(text) {
			cut := append([]Span(nil), spans[:i]...)
			if sp.Start < len(text) {
				cut = append(cut, Span{Start: sp.Start, End: len(text), Class: sp.Class})
			}
			return cut
		}
	}
	return spans
}

// blobLexers remembers the lexer content analysis chose for a blob id
// (nil: plain); it is emptied when it grows past maxBlobLexers.
var (
	blobLexers     sync.Map // id → cachedLexer
	blobLexerCount atomic.Int64
)

const maxBlobLexers = 4096

// blobLexer is the lexer chosen before for either blob; nil when none was.
func blobLexer(ids ...string) chroma.Lexer {
	for _, id := range ids {
		if v, ok := blobLexers.Load(id); ok && id != "" {
			return v.(cachedLexer).l
		}
	}
	return nil
}

func rememberBlobLexer(newID, oldID string, l chroma.Lexer) {
	if l == nil {
		return // chosen again: cheap, and a later read may find a shebang
	}
	if blobLexerCount.Add(1) > maxBlobLexers {
		blobLexers.Range(func(k, _ any) bool { blobLexers.Delete(k); return true })
		blobLexerCount.Store(0)
	}
	for _, id := range []string{newID, oldID} {
		if id != "" {
			blobLexers.Store(id, cachedLexer{l})
		}
	}
}

// interpreters names the lexer of a shebang's interpreter where chroma
// knows it by another name.
var interpreters = map[string]string{"node": "javascript", "nodejs": "javascript", "deno": "typescript", "bun": "javascript", "pwsh": "powershell", "runghc": "haskell", "escript": "erlang"}

// lexerByContent picks the lexer of a file whose name says nothing: its
// shebang's interpreter (#!/usr/bin/env python3, #!/bin/sh), else the one
// chroma's content analysis is most sure of (at least minAnalysis); nil
// when neither says (shown plain).
func lexerByContent(text []byte) chroma.Lexer {
	if len(text) == 0 {
		return nil
	}
	head := text[:min(len(text), 8<<10)]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		f := strings.Fields(string(line))
		if len(f) > 0 {
			name := filepath.Base(f[0])
			if name == "env" {
				name = ""
				for _, a := range f[1:] {
					if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
						name = filepath.Base(a)
						break
					}
				}
			}
			if l := interpreterLexer(name); l != nil {
				return chroma.Coalesce(l)
			}
		}
	}
	var best chroma.Lexer
	var score float32
	for _, l := range lexers.GlobalLexerRegistry.Lexers {
		if a, ok := l.(chroma.Analyser); ok {
			if w := a.AnalyseText(string(head)); w > score {
				best, score = l, w
			}
		}
	}
	if score < minAnalysis {
		return nil
	}
	return chroma.Coalesce(best)
}

// minAnalysis is the least confidence of chroma's content analysis taken
// for a file's language: below it, its guesses are often wrong on prose.
const minAnalysis = 0.5

// interpreterLexer is the lexer of an interpreter's name: by chroma's name
// or alias (python3, sh, bash, ruby, perl), else without a version
// (python3.11 → python).
func interpreterLexer(name string) chroma.Lexer {
	if name == "" {
		return nil
	}
	if n, ok := interpreters[name]; ok {
		name = n
	}
	for _, n := range []string{name, strings.TrimRight(name, "0123456789.")} {
		if n == "" {
			continue
		}
		if l := lexers.GlobalLexerRegistry.Get(n); l != nil && lexerNamed(l, n) {
			return l
		}
	}
	return nil
}

// lexerNamed reports whether l is named or aliased n (Get also matches n
// as a file extension, which an interpreter's name is not).
func lexerNamed(l chroma.Lexer, n string) bool {
	c := l.Config()
	if strings.EqualFold(c.Name, n) {
		return true
	}
	for _, a := range c.Aliases {
		if strings.EqualFold(a, n) {
			return true
		}
	}
	return false
}
