package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lazy/errkind"
)

// Book keeps the count of wrong passphrases where every daemon of the
// project sees it: the store (store.Store implements it), shared by the
// members of a cluster and kept across restarts.
type Book interface {
	// UpdatePassphraseTries runs fn on the count kept under name and the
	// time before which no attempt is checked, in one transaction with
	// every other update of name, and keeps what fn returns (0: forgets).
	UpdatePassphraseTries(ctx context.Context, name string, fn func(wrong int, until time.Time) (int, time.Time)) error
}

// Limiter slows down guessing: after FreeTries wrong passphrases for one
// key (the project: every task's passphrase is the same one), each further
// attempt must wait, twice as long after every wrong one, up to MaxWait. A
// right passphrase clears the count. The count lives in Book, so a restart
// or another member of the cluster does not clear it, and a new task does
// not either.
//
// An attempt is counted as wrong before its passphrase is hashed, and the
// count is cleared if it was right: guesses sent at once cannot all slip in
// before the first of them is counted.
type Limiter struct {
	Book Book             // required
	Now  func() time.Time // nil: time.Now
}

// FreeTries and MaxWait bound the guessing.
const (
	FreeTries = 3
	MaxWait   = 5 * time.Minute
)

// WaitError refuses an attempt made before its wait is over.
type WaitError struct{ Wait time.Duration }

func (e *WaitError) Error() string {
	return fmt.Sprintf("too many wrong passphrases for this project: wait %s, then try again (each wrong one doubles the wait, up to %s); nothing was checked", e.Wait.Round(time.Second), MaxWait)
}

// ErrorKind is errkind.Wait.
func (e *WaitError) ErrorKind() errkind.Kind { return errkind.Wait }

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// backoff is the wait after the n-th wrong passphrase in a row.
func backoff(n int) time.Duration {
	if n < FreeTries {
		return 0
	}
	return min(time.Second<<min(n-FreeTries, 20), MaxWait) // 2^20 s is past MaxWait
}

// Check runs verify for key unless key must wait; a wrong passphrase
// (ErrWrong) counts against key. When the count cannot be read or written
// nothing is checked.
func (l *Limiter) Check(ctx context.Context, key string, verify func() error) error {
	if l.Book == nil {
		return errors.New("approval: the limiter has no book to count wrong passphrases in")
	}
	var (
		wait  time.Duration
		count int
	)
	err := l.Book.UpdatePassphraseTries(ctx, key, func(wrong int, until time.Time) (int, time.Time) {
		now := l.now()
		if now.Before(until) {
			wait = until.Sub(now)
			return wrong, until
		}
		count = wrong + 1
		return count, now.Add(backoff(count))
	})
	if err != nil {
		return fmt.Errorf("count the passphrase attempt (nothing was checked; try again): %w", err)
	}
	if wait > 0 {
		return &WaitError{Wait: max(wait, time.Second)}
	}
	err = verify()
	if errors.Is(err, ErrWrong) {
		if b := backoff(count); b > 0 {
			return fmt.Errorf("%w (wait %s before the next try)", err, b)
		}
		return err
	}
	// right, or not checked at all (no passphrase set, its file unreadable):
	// the attempt was no guess. A right one clears the count; otherwise
	// this attempt's reservation is taken back.
	uerr := l.Book.UpdatePassphraseTries(ctx, key, func(wrong int, until time.Time) (int, time.Time) {
		if err == nil {
			return 0, time.Time{}
		}
		wrong = max(wrong-1, 0)
		if u := l.now().Add(backoff(wrong)); u.Before(until) {
			until = u
		}
		return wrong, until
	})
	if err == nil && uerr != nil {
		// the passphrase was right; the count stays until the next right one
		return nil
	}
	return err
}
