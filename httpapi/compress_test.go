package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lazy/api"
)

// get sends a GET through the router, with acceptEncoding when not "".
func getEncoded(t *testing.T, h http.Handler, path, acceptEncoding string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1:26000"
	req.Header.Set("Authorization", "Bearer "+testBearer)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompressedSamePage: a page, its JSON and an asset sent gzipped to a
// client that accepts it are byte for byte what a client that does not
// gets, with the same status and security headers.
func TestCompressedSamePage(t *testing.T) {
	_, h := newPagesServer(t)
	for _, path := range []string{"/review/fix-login", "/api/review/fix-login/diff", "/assets/review.js", "/assets/app.css"} {
		t.Run(path, func(t *testing.T) {
			plain := getEncoded(t, h, path, "")
			zipped := getEncoded(t, h, path, "br;q=1.0, gzip;q=0.8")
			if plain.Code != 200 || zipped.Code != 200 {
				t.Fatalf("status %d and %d", plain.Code, zipped.Code)
			}
			if ce := plain.Header().Get("Content-Encoding"); ce != "" {
				t.Fatalf("plain answer has Content-Encoding %q", ce)
			}
			if ce := zipped.Header().Get("Content-Encoding"); ce != "gzip" {
				t.Fatalf("Content-Encoding %q, want gzip", ce)
			}
			if cl := zipped.Header().Get("Content-Length"); cl != "" {
				t.Errorf("a gzipped answer keeps the plain Content-Length %s", cl)
			}
			got := gunzip(t, zipped.Body.Bytes())
			if !bytes.Equal(got, plain.Body.Bytes()) {
				t.Fatalf("the gzipped answer is another page: %d bytes against %d", len(got), plain.Body.Len())
			}
			if zipped.Body.Len() >= plain.Body.Len() {
				t.Errorf("gzipped %d bytes, plain %d", zipped.Body.Len(), plain.Body.Len())
			}
			for _, k := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Content-Type"} {
				if plain.Header().Get(k) == "" || zipped.Header().Get(k) != plain.Header().Get(k) {
					t.Errorf("%s: %q gzipped, %q plain", k, zipped.Header().Get(k), plain.Header().Get(k))
				}
			}
			if !strings.Contains(zipped.Header().Get("Vary"), "Accept-Encoding") {
				t.Errorf("Vary %q", zipped.Header().Get("Vary"))
			}
		})
	}
	// gzip;q=0 refuses it
	if rec := getEncoded(t, h, "/review/fix-login", "gzip;q=0, identity"); rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 got Content-Encoding %q", rec.Header().Get("Content-Encoding"))
	}
	// a short answer goes out plain
	if rec := getEncoded(t, h, "/api/review/queue", "gzip"); rec.Header().Get("Content-Encoding") != "" || rec.Code != 200 {
		t.Errorf("a %d-byte answer: %d, Content-Encoding %q", rec.Body.Len(), rec.Code, rec.Header().Get("Content-Encoding"))
	}
}

// TestCompressNeverHoldsAStream: an event stream to a client that accepts
// gzip is sent plain, each event as it comes.
func TestCompressNeverHoldsAStream(t *testing.T) {
	ch := make(chan api.Event, 1)
	stop := make(chan struct{})
	e, err := New(Deps{Bearer: testBearer, Token: testBearer, DashboardToken: testDash, Call: pages(fakeTasks{}, nil), Stopping: stop,
		Commands: Table(Events(api.CmdWatch, func(context.Context, api.WatchArgs) (<-chan api.Event, func(), error) { return ch, func() {}, nil }))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/rpc/watch", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+testBearer)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	req.Host = strings.Replace(srv.Listener.Addr().String(), "127.0.0.1", "localhost", 1)
	res, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d, Content-Encoding %q, Content-Type %q: %s", res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Content-Type"), b)
	}
	ch <- api.Event{Kind: "status", TaskID: "t1"}
	got := make(chan string, 1)
	go func() {
		br := bufio.NewReader(res.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			if strings.HasPrefix(l, "data: ") {
				got <- l
				return
			}
		}
	}()
	select {
	case l := <-got:
		if !strings.Contains(l, `"t1"`) {
			t.Fatalf("event %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event was held: it did not arrive while the stream stayed open")
	}
}
