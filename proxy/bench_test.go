package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lazy/config"
)

// benchEditor is a proxy whose editor upstream discards what it gets.
func benchEditor(b *testing.B) (*httptest.Server, string) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(up.Close)
	home := b.TempDir()
	_ = os.MkdirAll(filepath.Join(home, "credentials"), 0o700)
	_ = os.WriteFile(filepath.Join(home, "credentials", "editor"), []byte("key_REALEDITORKEY_abcdefghijklmnop"), 0o600)
	cfg := config.Defaults()
	cfg.Proxy.EditorUpstream = up.URL
	ph := NewEditorPlaceholder()
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: "x", EnvVar: "CURSOR_API_KEY", CreatedAt: time.Now()}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(p)
	b.Cleanup(srv.Close)
	return srv, ph
}

func benchEditorBody(b *testing.B, size int, withPH bool) {
	srv, ph := benchEditor(b)
	body := []byte(strings.Repeat("a", size))
	if withPH {
		copy(body[100:], `"`+ph+`"`)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := http.Post(srv.URL+"/_svc/cursor/"+ph+"/v1/x", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkEditorBody64KSubstituted is a 64 KiB body with the placeholder
// replaced in it; BenchmarkEditorBody64KPlus1Streamed is one byte more,
// forwarded as a stream untouched. Their difference is the substitution cost.
func BenchmarkEditorBody64KSubstituted(b *testing.B)   { benchEditorBody(b, MaxSubstituteBody, true) }
func BenchmarkEditorBody64KPlus1Streamed(b *testing.B) { benchEditorBody(b, MaxSubstituteBody+1, true) }

func BenchmarkGrantLookup(b *testing.B) {
	g := Grants{}
	var ph string
	for i := 0; i < 10000; i++ {
		ph = NewPlaceholder("api_key", "")
		g[ph] = Grant{Placeholder: ph}
	}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	p := &Proxy{o: Options{Grants: ptr, Now: time.Now}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if gr, _ := p.resolve(ph); gr == nil {
			b.Fatal("miss")
		}
	}
}
