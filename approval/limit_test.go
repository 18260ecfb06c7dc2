package approval

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lazy/store"
)

// newTestStore is a migrated SQLite store in a temp dir (path: reopen it).
func newTestStore(t *testing.T, path string) *store.SQL {
	t.Helper()
	st, err := store.OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

var ctx = context.Background()

func TestLimiterBacksOff(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Book: newTestStore(t, filepath.Join(t.TempDir(), "lazy.db")), Now: func() time.Time { return now }}
	wrong := func() error { return ErrWrong }
	right := func() error { return nil }
	for i := 1; i < FreeTries; i++ {
		if err := l.Check(ctx, "p1", wrong); !errors.Is(err, ErrWrong) {
			t.Fatalf("try %d: %v", i, err)
		}
	}
	if err := l.Check(ctx, "p1", wrong); !errors.Is(err, ErrWrong) {
		t.Fatalf("the try that starts the wait: %v", err)
	}
	var w *WaitError
	if err := l.Check(ctx, "p1", right); !errors.As(err, &w) || w.Wait != time.Second {
		t.Fatalf("within the wait, even the right passphrase is not checked: %v", err)
	}
	if err := l.Check(ctx, "p2", right); err != nil {
		t.Fatalf("another key is not held back: %v", err)
	}
	now = now.Add(time.Second)
	_ = l.Check(ctx, "p1", wrong) // the 4th wrong one: 2 s now
	now = now.Add(time.Second)
	if err := l.Check(ctx, "p1", right); !errors.As(err, &w) || w.Wait != time.Second {
		t.Fatalf("the wait doubles: %v", err)
	}
	now = now.Add(time.Second)
	if err := l.Check(ctx, "p1", right); err != nil {
		t.Fatalf("after the wait the right passphrase passes: %v", err)
	}
	if err := l.Check(ctx, "p1", wrong); !errors.Is(err, ErrWrong) || errors.As(err, &w) {
		t.Fatalf("a right one clears the count: %v", err)
	}
	for i := 0; i < 40; i++ {
		now = now.Add(MaxWait)
		_ = l.Check(ctx, "p3", wrong)
	}
	if err := l.Check(ctx, "p3", right); !errors.As(err, &w) || w.Wait > MaxWait {
		t.Fatalf("the wait is capped: %v", err)
	}
}

// TestLimiterSurvivesRestart: the count is the store's: a limiter made anew
// over the store reopened (a daemon restarted) goes on from it.
func TestLimiterSurvivesRestart(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "lazy.db")
	st := newTestStore(t, path)
	l := &Limiter{Book: st, Now: clock}
	for i := 0; i < FreeTries; i++ {
		_ = l.Check(ctx, "project", func() error { return ErrWrong })
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	l = &Limiter{Book: newTestStore(t, path), Now: clock}
	var w *WaitError
	if err := l.Check(ctx, "project", func() error { return nil }); !errors.As(err, &w) {
		t.Fatalf("after a restart within the wait: %v", err)
	}
	now = now.Add(time.Second)
	if err := l.Check(ctx, "project", func() error { return ErrWrong }); err == nil || err.Error() != ErrWrong.Error()+" (wait 2s before the next try)" {
		t.Fatalf("the 4th wrong one, after the restart: %v", err)
	}
}

// TestLimiterCountsBeforeHashing: guesses sent at once are counted before
// any is hashed, so no more than FreeTries are checked before the wait.
func TestLimiterCountsBeforeHashing(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Book: newTestStore(t, filepath.Join(t.TempDir(), "lazy.db")), Now: func() time.Time { return now }}
	var checked, waited atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.Check(ctx, "project", func() error {
				checked.Add(1)
				<-release // a slow hash: every guess is in before any ends
				return ErrWrong
			})
			var w *WaitError
			if errors.As(err, &w) {
				waited.Add(1)
			}
		}()
	}
	// every guess is either being checked or was told to wait
	for deadline := time.Now().Add(10 * time.Second); checked.Load()+waited.Load() != 12; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("checked %d, told to wait %d, of 12", checked.Load(), waited.Load())
		}
	}
	close(release)
	wg.Wait()
	if n := checked.Load(); n != FreeTries {
		t.Fatalf("%d of 12 guesses sent at once were checked, want %d", n, FreeTries)
	}
}

// TestLimiterNoPassphraseIsNoGuess: an attempt that was not checked (no
// passphrase set) counts for nothing.
func TestLimiterNoPassphraseIsNoGuess(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Book: newTestStore(t, filepath.Join(t.TempDir(), "lazy.db")), Now: func() time.Time { return now }}
	for i := 0; i < 2*FreeTries; i++ {
		if err := l.Check(ctx, "project", func() error { return ErrNotSet }); !errors.Is(err, ErrNotSet) {
			t.Fatalf("try %d: %v", i, err)
		}
	}
	if err := l.Check(ctx, "project", func() error { return ErrWrong }); err != ErrWrong {
		t.Fatalf("the first wrong one after attempts without a passphrase: %v", err)
	}
}
