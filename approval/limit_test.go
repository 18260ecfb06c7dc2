package approval

import (
	"errors"
	"testing"
	"time"
)

func TestLimiterBacksOff(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Now: func() time.Time { return now }}
	wrong := func() error { return ErrWrong }
	right := func() error { return nil }
	for i := 1; i < FreeTries; i++ {
		if err := l.Check("t1", wrong); !errors.Is(err, ErrWrong) {
			t.Fatalf("try %d: %v", i, err)
		}
	}
	if err := l.Check("t1", wrong); !errors.Is(err, ErrWrong) {
		t.Fatalf("the try that starts the wait: %v", err)
	}
	var w *WaitError
	if err := l.Check("t1", right); !errors.As(err, &w) || w.Wait != time.Second {
		t.Fatalf("within the wait, even the right passphrase is not checked: %v", err)
	}
	if err := l.Check("t2", right); err != nil {
		t.Fatalf("another task is not held back: %v", err)
	}
	now = now.Add(time.Second)
	_ = l.Check("t1", wrong) // the 4th wrong one: 2 s now
	now = now.Add(time.Second)
	if err := l.Check("t1", right); !errors.As(err, &w) || w.Wait != time.Second {
		t.Fatalf("the wait doubles: %v", err)
	}
	now = now.Add(time.Second)
	if err := l.Check("t1", right); err != nil {
		t.Fatalf("after the wait the right passphrase passes: %v", err)
	}
	if err := l.Check("t1", wrong); !errors.Is(err, ErrWrong) || errors.As(err, &w) {
		t.Fatalf("a right one clears the count: %v", err)
	}
	for i := 0; i < 40; i++ {
		now = now.Add(MaxWait)
		_ = l.Check("t3", wrong)
	}
	if err := l.Check("t3", right); !errors.As(err, &w) || w.Wait > MaxWait {
		t.Fatalf("the wait is capped: %v", err)
	}
}
