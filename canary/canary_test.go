package canary

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/crypto/ssh"
)

func maker(t testing.TB) *Maker {
	t.Helper()
	return NewMaker([]byte("0123456789abcdef0123456789abcdef"))
}

// TestDecoysLookReal: every decoy has the shape tools expect (the SSH key
// parses as an OpenSSH ed25519 key whose public half is the .pub file), its
// marks are in its files, and they survive JSON encoding unchanged.
func TestDecoysLookReal(t *testing.T) {
	d := maker(t).For("0190aaaabbbbccccddddeeeeffff0000")
	files := map[string]string{}
	for _, f := range d.Files {
		files[f.Path] = string(f.Body)
	}
	for _, p := range []string{".ssh/id_ed25519", ".ssh/id_ed25519.pub", ".aws/credentials", ".netrc", ".config/gh/hosts.yml"} {
		if files[p] == "" {
			t.Errorf("no decoy at %s", p)
		}
	}
	key, err := ssh.ParseRawPrivateKey([]byte(files[".ssh/id_ed25519"]))
	if err != nil {
		t.Fatalf("the SSH decoy does not parse: %v\n%s", err, files[".ssh/id_ed25519"])
	}
	priv, ok := key.(*ed25519.PrivateKey)
	if !ok {
		t.Fatalf("the SSH decoy is a %T, want ed25519", key)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ssh.MarshalAuthorizedKey(pub)); !strings.HasPrefix(files[".ssh/id_ed25519.pub"], strings.TrimSpace(got)) {
		t.Errorf(".pub %q does not match the key's %q", files[".ssh/id_ed25519.pub"], got)
	}
	for _, line := range strings.Split(files[".ssh/id_ed25519"], "\n") {
		if len(line) > 70 {
			t.Errorf("key line of %d columns, want at most 70 as ssh-keygen writes", len(line))
		}
	}
	if !strings.Contains(files[".aws/credentials"], "aws_access_key_id = AKIA") {
		t.Errorf("aws credentials: %q", files[".aws/credentials"])
	}
	if len(d.Marks) != 5 {
		t.Fatalf("marks: %q", d.Marks)
	}
	all := strings.Join(func() []string {
		var s []string
		for _, f := range d.Files {
			s = append(s, string(f.Body))
		}
		return s
	}(), "")
	for _, m := range d.Marks {
		if len(m) < Window || !strings.Contains(all, m) {
			t.Errorf("mark %q: short or in no decoy file", m)
		}
		if strings.Contains(m, "svc") {
			t.Errorf("mark %q carries the placeholder marker", m)
		}
		j, _ := json.Marshal(m)
		if string(j) != `"`+m+`"` {
			t.Errorf("mark %q changes in JSON: %s", m, j)
		}
	}
}

// TestDecoysPerTask: the same task gets the same decoys (a restart changes
// nothing); another task, or another key, entirely different ones.
func TestDecoysPerTask(t *testing.T) {
	m := maker(t)
	a, a2, b := m.For("task-a"), m.For("task-a"), m.For("task-b")
	other := NewMaker([]byte("another key of sixteen bytes or more")).For("task-a")
	if strings.Join(a.Marks, ",") != strings.Join(a2.Marks, ",") || !bytes.Equal(a.Files[0].Body, a2.Files[0].Body) {
		t.Error("the same task got other decoys")
	}
	for i := range a.Marks {
		if a.Marks[i] == b.Marks[i] || a.Marks[i] == other.Marks[i] {
			t.Errorf("mark %d shared: %q", i, a.Marks[i])
		}
	}
}

func setOf(t testing.TB, ids ...string) (*Set, map[string]Decoys) {
	m := maker(t)
	marks := map[Owner][]string{}
	ds := map[string]Decoys{}
	for _, id := range ids {
		d := m.For(id)
		ds[id] = d
		marks[Owner{TaskID: id, Ref: id[:4]}] = d.Marks
	}
	return NewSet(marks), ds
}

// TestSetFinds: each mark, any Window bytes of it, the whole file encoded as
// JSON, inside any text; nothing in random text or another key's decoys.
func TestSetFinds(t *testing.T) {
	s, ds := setOf(t, "task-a", "task-b", "task-c")
	for id, d := range ds {
		for _, m := range d.Marks {
			for _, piece := range []string{m, m[:Window], m[len(m)-Window:]} {
				o, ok := s.FindString("prompt: " + piece + " end")
				if !ok || o.TaskID != id {
					t.Errorf("%q of %s: got %v %v", piece, id, o, ok)
				}
			}
			if _, ok := s.FindString(m[:Window-1]); ok {
				t.Errorf("%d bytes of a mark found", Window-1)
			}
		}
		for _, f := range d.Files {
			if strings.HasSuffix(f.Path, ".pub") {
				continue
			}
			j, _ := json.Marshal(map[string]any{"messages": []any{map[string]string{"role": "user", "content": "here: " + string(f.Body)}}})
			if o, ok := s.Find(j); !ok || o.TaskID != id {
				t.Errorf("%s of %s as JSON: not found", f.Path, id)
			}
		}
	}
	noise := make([]byte, 4<<20)
	_, _ = rand.Read(noise)
	if o, ok := s.Find(noise); ok {
		t.Errorf("random bytes hit %v", o)
	}
	for _, d := range []Decoys{NewMaker([]byte("another key of sixteen bytes or more")).For("task-a")} {
		for _, f := range d.Files {
			if o, ok := s.Find(f.Body); ok {
				t.Errorf("another key's %s hit %v", f.Path, o)
			}
		}
	}
	if _, ok := Empty.FindString(ds["task-a"].Marks[0]); ok {
		t.Error("the empty set found a mark")
	}
}

// TestReaderSplits: a mark split across reads at every offset is found,
// and no byte of it is handed on; a clean stream passes byte for byte
// whatever the read sizes.
func TestReaderSplits(t *testing.T) {
	s, ds := setOf(t, "task-a")
	m := ds["task-a"].Marks[1]
	body := strings.Repeat("x", 100) + m + strings.Repeat("y", 100)
	at := strings.Index(body, m)
	for cut := 1; cut < len(body); cut++ {
		src := io.MultiReader(strings.NewReader(body[:cut]), strings.NewReader(body[cut:]))
		var got Owner
		r := s.Reader(src, func(o Owner) { got = o })
		out, err := io.ReadAll(r)
		if !errors.Is(err, ErrFound) || got.TaskID != "task-a" {
			t.Fatalf("cut %d: err %v, owner %v", cut, err, got)
		}
		if len(out) > at {
			t.Fatalf("cut %d: %d bytes handed on, the mark starts at %d", cut, len(out), at)
		}
	}
	clean := strings.Repeat("the quick brown fox 0123456789 ", 5000)
	for _, r := range []io.Reader{
		s.Reader(strings.NewReader(clean), nil),
		s.Reader(iotest.OneByteReader(strings.NewReader(clean)), nil),
		iotest.OneByteReader(s.Reader(iotest.HalfReader(strings.NewReader(clean)), nil)),
	} {
		out, err := io.ReadAll(r)
		if err != nil || string(out) != clean {
			t.Fatalf("clean stream: %d bytes, err %v", len(out), err)
		}
	}
	if err := iotest.TestReader(s.Reader(strings.NewReader(clean), nil), []byte(clean)); err != nil {
		t.Fatal(err)
	}
}

// TestReaderScansInPlace: read into buffers of every size — smaller than
// a piece, about one, the body's own length as the proxy's hold reads it,
// larger — a mark split between the source's reads at every offset is
// found and no byte from its start on is handed on; a clean source passes
// whole and the reader passes iotest's checks.
func TestReaderScansInPlace(t *testing.T) {
	s, ds := setOf(t, "task-a")
	m := ds["task-a"].Marks[0]
	body := strings.Repeat("x", 40) + m + strings.Repeat("y", 3000)
	at := strings.Index(body, m)
	sizes := []int{1, Window - 2, Window - 1, Window, Window + 1, 2 * Window, len(body), len(body) + 1, 64 << 10}
	for _, size := range sizes {
		for cut := 1; cut < at+len(m)+2; cut++ {
			src := io.MultiReader(strings.NewReader(body[:cut]), strings.NewReader(body[cut:]))
			var got Owner
			r := s.Reader(src, func(o Owner) { got = o })
			var out []byte
			buf := make([]byte, size)
			var err error
			for {
				var n int
				n, err = r.Read(buf)
				out = append(out, buf[:n]...)
				if err != nil {
					break
				}
			}
			if !errors.Is(err, ErrFound) || got.TaskID != "task-a" || len(out) > at || string(out) != body[:len(out)] {
				t.Fatalf("reads of %d, cut %d: err %v, owner %v, %d bytes handed on (the mark starts at %d)", size, cut, err, got, len(out), at)
			}
		}
	}
	clean := strings.Repeat("the quick brown fox 0123456789 ", 500)
	for _, size := range sizes {
		r := s.Reader(iotest.HalfReader(strings.NewReader(clean)), nil)
		buf := make([]byte, size)
		var out []byte
		for {
			n, err := r.Read(buf)
			out = append(out, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("reads of %d: %v", size, err)
			}
		}
		if string(out) != clean {
			t.Fatalf("reads of %d: %d bytes of %d passed, or changed", size, len(out), len(clean))
		}
		if err := iotest.TestReader(s.Reader(strings.NewReader(clean), nil), []byte(clean)); err != nil {
			t.Fatal(err)
		}
	}
	// the proxy's hold: the whole body read at once into a buffer of its length
	full := make([]byte, len(clean))
	if n, err := io.ReadFull(s.Reader(strings.NewReader(clean), nil), full); err != nil || n != len(clean) || string(full) != clean {
		t.Fatalf("read whole: %d bytes, err %v", n, err)
	}
}

// TestSetWith: adding an owner keeps the others; adding one twice is free.
func TestSetWith(t *testing.T) {
	m := maker(t)
	a, b := m.For("a"), m.For("b")
	s := Empty.With(Owner{TaskID: "a"}, a.Marks)
	s2 := s.With(Owner{TaskID: "b"}, b.Marks)
	if s2.With(Owner{TaskID: "b"}, b.Marks) != s2 || s2.Len() != 2 {
		t.Fatal("With twice made a new set")
	}
	if o, ok := s2.FindString(a.Marks[2]); !ok || o.TaskID != "a" {
		t.Error("a lost")
	}
	if _, ok := s.FindString(b.Marks[2]); ok {
		t.Error("the old set changed")
	}
}

// BenchmarkScan: one multi-pattern pass over a model call's body, with the
// decoys of 10 and of 1,000 tasks.
func BenchmarkScan(b *testing.B) {
	b.Run("tasks=1", func(b *testing.B) { benchScan(b, 1) })
	b.Run("tasks=10", func(b *testing.B) { benchScan(b, 10) })
	b.Run("tasks=1000", func(b *testing.B) { benchScan(b, 1000) })
}

func benchScan(b *testing.B, n int) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strings.Repeat("0", 28) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	s, _ := setOf(b, ids...)
	body := bytes.Repeat([]byte(`{"role":"user","content":"func main() { fmt.Println(42) } // base64: QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="}`), 10000)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		if _, ok := s.Find(body); ok {
			b.Fatal("hit")
		}
	}
}

// TestScanAgainstNaive: the set and a scanner fed random chunks agree with
// a plain search for every Window bytes of every mark, over random text
// with pieces of marks (and near misses: a piece with one byte changed)
// placed at random offsets; the reader never hands on a byte of the first
// piece.
func TestScanAgainstNaive(t *testing.T) {
	s, ds := setOf(t, "task-a", "task-b")
	var marks []string
	for _, d := range ds {
		marks = append(marks, d.Marks...)
	}
	first := func(text string) int { // where the first piece starts, or -1
		best := -1
		for _, m := range marks {
			for i := 0; i+Window <= len(m); i++ {
				if at := strings.Index(text, m[i:i+Window]); at >= 0 && (best < 0 || at < best) {
					best = at
				}
			}
		}
		return best
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=\\\" {}:,\n"
	hits := 0
	for round := range 3000 {
		text := make([]byte, rng.IntN(300))
		for i := range text {
			text[i] = alphabet[rng.IntN(len(alphabet))]
		}
		for range rng.IntN(3) {
			m := marks[rng.IntN(len(marks))]
			i := rng.IntN(len(m) - Window + 1)
			n := Window - 1 + rng.IntN(len(m)-i-Window+2)
			p := []byte(m[i : i+n])
			if rng.IntN(2) == 0 {
				p[rng.IntN(len(p))] ^= 0x20 // a near miss (or a piece still, if long enough)
			}
			at := rng.IntN(len(text) + 1)
			text = append(text[:at], append(p, text[at:]...)...)
		}
		want := first(string(text))
		if want >= 0 {
			hits++
		}
		_, found := s.Find(text)
		_, foundStr := s.FindString(string(text))
		if found != (want >= 0) || foundStr != found {
			t.Fatalf("round %d: Find %v, FindString %v, a piece at %d of %q", round, found, foundStr, want, text)
		}
		// a stream in random chunks, read through the reader in random sizes
		var src []io.Reader
		for rest := text; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 1+rng.IntN(64)))
			src = append(src, bytes.NewReader(rest[:n]))
			rest = rest[n:]
		}
		r := s.Reader(io.MultiReader(src...), nil)
		var out []byte
		buf := make([]byte, 1+rng.IntN(80))
		var err error
		for err == nil {
			var n int
			n, err = r.Read(buf)
			out = append(out, buf[:n]...)
		}
		switch {
		case want >= 0 && (!errors.Is(err, ErrFound) || len(out) > want):
			t.Fatalf("round %d: a piece at %d: err %v, %d bytes handed on", round, want, err, len(out))
		case want < 0 && (err != io.EOF || !bytes.Equal(out, text)):
			t.Fatalf("round %d: no piece: err %v, %d of %d bytes", round, err, len(out), len(text))
		}
	}
	t.Logf("3000 texts, %d with a piece of a mark", hits)
	if hits < 500 || hits > 2500 {
		t.Fatalf("%d of 3000 texts with a piece: the test no longer tries both", hits)
	}
}
