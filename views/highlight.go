package views

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sort"
	"strings"
	"sync"

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
	hlCache.put(key, out)
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

func buildStyle() {
	st := styles.Get(highlightStyle)
	styleSet = map[string]bool{}
	var rules []string
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
	for tt, short := range chroma.StandardTypes {
		// white space gets no class: a span per run of spaces is weight
		// and shows nothing
		if short == "" || tt == chroma.Background || tt == chroma.Text || tt == chroma.TextWhitespace {
			continue
		}
		e := st.Get(tt)
		var decl []string
		if e.Colour.IsSet() && e.Colour != plain {
			decl = append(decl, "color:"+e.Colour.String())
		}
		if e.Bold == chroma.Yes {
			decl = append(decl, "font-weight:600")
		}
		if e.Italic == chroma.Yes {
			decl = append(decl, "font-style:italic")
		}
		if len(decl) == 0 {
			continue
		}
		styleSet[short] = true
		rules = append(rules, fmt.Sprintf(".text .%s { %s; }", short, strings.Join(decl, "; ")))
	}
	sort.Strings(rules)
	styleCSS = "/* highlighted code (chroma, style " + highlightStyle + ") */\n" + strings.Join(rules, "\n") + "\n"
}

// hlKey names one lexed text: the lexer, and the text's hash and length.
type hlKey struct {
	lexer string
	sum   uint64
	size  int
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
	hlCacheBytes   = 16 << 20
)

var hlCache = &spanCache{m: map[hlKey][][]Span{}}

// spanCache remembers lexed texts, first in, first out.
type spanCache struct {
	mu    sync.Mutex
	m     map[hlKey][][]Span
	order []hlKey
	size  int // the sum of the keys' sizes
}

func (c *spanCache) get(k hlKey) ([][]Span, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *spanCache) put(k hlKey, v [][]Span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	for len(c.order) > 0 && (len(c.order) >= hlCacheEntries || c.size+k.size > hlCacheBytes) {
		delete(c.m, c.order[0])
		c.size -= c.order[0].size
		c.order = c.order[1:]
	}
	c.m[k] = v
	c.order = append(c.order, k)
	c.size += k.size
}

// ForgetHighlights empties the highlight cache: the next render lexes
// everything again (a cold render, as benchmarks measure it).
func ForgetHighlights() {
	hlCache.mu.Lock()
	defer hlCache.mu.Unlock()
	hlCache.m, hlCache.order, hlCache.size = map[hlKey][][]Span{}, nil, 0
}
