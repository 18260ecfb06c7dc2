package logfile

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLinesWholeInOrder: many goroutines log through one Writer into a
// real file; every line arrives whole, each goroutine's in its order, and
// Close leaves nothing unwritten.
func TestLinesWholeInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := New(f)
	log := slog.New(slog.NewTextHandler(w, nil))
	const goroutines, lines = 16, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				log.Info(fmt.Sprintf("net> g%d line %d %s", g, i, strings.Repeat("x", i%300)))
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, goroutines)
	n := 0
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var g, i int
		if _, err := fmt.Sscanf(string(l[bytes.Index(l, []byte("net> ")):]), "net> g%d line %d", &g, &i); err != nil || !bytes.HasPrefix(l, []byte("time=")) {
			t.Fatalf("a line not whole: %q", l)
		}
		if i != next[g] {
			t.Fatalf("goroutine %d: line %d after %d", g, i, next[g]-1)
		}
		next[g]++
		n++
	}
	if n != goroutines*lines {
		t.Fatalf("%d lines in the file, %d logged", n, goroutines*lines)
	}
	log.Info("after close") // written at once
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte("after close")) {
		t.Fatal("a line logged after Close is not in the file")
	}
}

// TestLineWrittenWithoutClose: a lone line reaches the file while the
// Writer is open (a goroutine's wake, no timer to wait out).
func TestLineWrittenWithoutClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := New(f)
	defer w.Close()
	start := time.Now()
	fmt.Fprintln(w, "one line")
	for {
		if b, _ := os.ReadFile(path); string(b) == "one line\n" {
			t.Logf("in the file after %s", time.Since(start))
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("a line logged 5 s ago is not in the file")
		}
		time.Sleep(time.Millisecond)
	}
}
