package actors

import (
	"testing"
	"time"
)

// TestPushBackoff: the waits between tries of a pending push double from
// the base, stop growing at the most, and are jittered by at most a fifth
// either way (never all the same).
func TestPushBackoff(t *testing.T) {
	base, most := 2*time.Second, 2*time.Minute
	seen := map[time.Duration]bool{}
	for tries := 1; tries <= 40; tries++ {
		want := min(base<<min(tries-1, 16), most)
		got := pushBackoff(base, most, tries)
		if got < want-want/5 || got > want+want/5 {
			t.Fatalf("try %d: wait %v, want %v ± a fifth", tries, got, want)
		}
		if want == most {
			seen[got] = true
		}
	}
	if len(seen) < 2 {
		t.Errorf("the capped waits are all %v: no jitter", seen)
	}
}
