package approval

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Limiter slows down guessing: after FreeTries wrong passphrases for one
// key (a task), each further attempt must wait, twice as long after every
// wrong one, up to MaxWait. A right passphrase clears the count. It lives in
// the daemon's memory: a restart forgets it (the hash is slow anyway).
type Limiter struct {
	Now func() time.Time

	mu sync.Mutex
	m  map[string]*tries
}

type tries struct {
	wrong int
	until time.Time
}

// FreeTries and MaxWait bound the guessing.
const (
	FreeTries = 3
	MaxWait   = 5 * time.Minute
)

// WaitError refuses an attempt made before its wait is over.
type WaitError struct{ Wait time.Duration }

func (e *WaitError) Error() string {
	return fmt.Sprintf("too many wrong passphrases for this task: wait %s, then try again (each wrong one doubles the wait, up to %s); nothing was checked", e.Wait.Round(time.Second), MaxWait)
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Check runs verify for key unless key must wait; a wrong passphrase
// (ErrWrong) counts against key.
func (l *Limiter) Check(key string, verify func() error) error {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*tries{}
	}
	t := l.m[key]
	if t != nil && l.now().Before(t.until) {
		wait := t.until.Sub(l.now())
		l.mu.Unlock()
		return &WaitError{Wait: max(wait, time.Second)}
	}
	l.mu.Unlock()
	err := verify()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		delete(l.m, key)
	case errors.Is(err, ErrWrong):
		if t = l.m[key]; t == nil {
			t = &tries{}
			l.m[key] = t
		}
		t.wrong++
		if t.wrong >= FreeTries {
			wait := min(time.Second<<min(t.wrong-FreeTries, 20), MaxWait) // 2^20 s is past MaxWait
			t.until = l.now().Add(wait)
			return fmt.Errorf("%w (wait %s before the next try)", err, wait)
		}
	}
	return err
}
