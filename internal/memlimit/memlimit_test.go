package memlimit

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestLimit: a small daemon gets the floor; a larger one what GOGC would
// let it reach and more, never less; GOGC=off sets no limit.
func TestLimit(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name string
		u    Usage
		want int64
	}{
		{"small", Usage{Live: 6 * mb, Stacks: mb, NonHeap: 6 * mb, GOGC: 100}, Floor},
		// 40 + 41 = 81 MB the heap may reach, 8 beside it: 89 + 1/16
		{"large", Usage{Live: 40 * mb, Stacks: mb, NonHeap: 8 * mb, GOGC: 100}, (89 * mb) + (89*mb)/16},
		{"GOGC=200", Usage{Live: 40 * mb, NonHeap: 8 * mb, GOGC: 200}, (128 * mb) + (128*mb)/16},
		{"GOGC=off", Usage{Live: 40 * mb, GOGC: 0}, math.MaxInt64},
	} {
		if got := Limit(c.u, Floor); got != c.want {
			t.Errorf("%s: limit %d, want %d", c.name, got, c.want)
		}
	}
	for live := uint64(0); live < 4<<30; live = live*3 + mb {
		u := Usage{Live: live, Stacks: live / 10, Globals: mb, NonHeap: 5 * mb, GOGC: 100}
		goal := u.Live + u.Live + u.Stacks + u.Globals
		if got := Limit(u, Floor); got < int64(goal+u.NonHeap) || got < Floor {
			t.Fatalf("live %d: limit %d under what GOGC=100 lets the runtime reach (%d) or the floor", live, got, goal+u.NonHeap)
		}
	}
}

// TestPercent: a small daemon's heap may grow to what the floor leaves it
// (Limit at that percent is the floor, and the heap goal fills it); one
// whose GOGC=100 goal fills it gets 100; the percent stays within
// [100, MaxPercent].
func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name string
		u    Usage
		want uint64
	}{
		// the floor less a seventeenth (the limit's margin: 30.1 MiB),
		// less 8 MiB beside the heap and 7 live: 15.1 MiB of growth over
		// 8 scanned
		{"the bench's daemon", Usage{Live: 7 * mb, Stacks: mb / 2, Globals: mb / 2, NonHeap: 8 * mb}, 188},
		{"large", Usage{Live: 40 * mb, Stacks: mb, NonHeap: 8 * mb}, 100},
		{"at the floor", Usage{Live: 11 * mb, Stacks: mb / 2, NonHeap: 8 * mb}, 100},
		{"tiny", Usage{Live: mb, NonHeap: 4 * mb}, MaxPercent},
		{"empty", Usage{}, MaxPercent},
	} {
		got := Percent(c.u, Floor)
		if got != c.want {
			t.Errorf("%s: percent %d, want %d", c.name, got, c.want)
		}
		u := c.u
		u.GOGC = got
		if got > 100 && got < MaxPercent {
			if l := Limit(u, Floor); l != Floor {
				t.Errorf("%s: the limit at percent %d is %d, not the floor", c.name, got, l)
			}
			if goal, room := u.goal(got), u.room(Floor); room-goal > room/50 {
				t.Errorf("%s: the heap goal %d leaves %d of the floor's %d unused", c.name, goal, room-goal, room)
			}
		}
	}
	if got := Percent(Usage{Live: mb}, 0); got != 100 {
		t.Errorf("no floor: percent %d, want 100", got)
	}
}

// TestFollowRaisesTheLimit: with the real runtime, a live heap above the
// floor raises the limit past twice it within an interval or two, and the
// limit found before is put back at the end. A GOMEMLIMIT in the
// environment leaves the limit alone.
func TestFollowRaisesTheLimit(t *testing.T) {
	t.Setenv("GOGC", "") // Follow tunes the percent when the environment leaves it
	runtime.GC()         // what an earlier run (-count) held is not live
	before, gogcBefore := debug.SetMemoryLimit(-1), Read().GOGC
	ctx, cancel := context.WithCancel(context.Background())
	if !Follow(ctx, Floor) {
		t.Fatal("Follow set nothing without GOMEMLIMIT")
	}
	if got := debug.SetMemoryLimit(-1); got != Floor {
		t.Errorf("a small test binary's limit: %d, want the floor %d", got, Floor)
	}
	if got := Read().GOGC; got <= 100 {
		t.Errorf("a small test binary's GC percent: %d, want it raised toward the floor", got)
	}
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	runtime.GC()
	deadline := time.Now().Add(3 * Interval)
	for debug.SetMemoryLimit(-1) < 2*64<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("64 MB live for %s, and the limit is still %d", 3*Interval, debug.SetMemoryLimit(-1))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := Read().GOGC; got != 100 {
		t.Errorf("64 MB live: GC percent %d, want Go's default 100", got)
	}
	runtime.KeepAlive(live)
	cancel()
	waitPutBack(t, before, gogcBefore, deadline.Add(time.Second))

	// a GOGC in the environment: the limit follows it, the percent is left
	t.Setenv("GOGC", "100")
	ctx, cancel = context.WithCancel(context.Background())
	if !Follow(ctx, Floor) {
		t.Fatal("Follow set nothing with GOGC set")
	}
	if got := Read().GOGC; got != gogcBefore {
		t.Errorf("with GOGC set, Follow changed the percent to %d", got)
	}
	cancel()
	waitPutBack(t, before, gogcBefore, deadline.Add(2*time.Second))
	t.Setenv("GOMEMLIMIT", "1GiB")
	if Follow(context.Background(), Floor) {
		t.Fatal("Follow set a limit over the user's GOMEMLIMIT")
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("with GOMEMLIMIT set, the limit changed to %d", got)
	}
}

// waitPutBack waits until Follow, its ctx ended, has put back the limit and
// the GC percent it found, failing at deadline.
func waitPutBack(t *testing.T, limit int64, percent uint64, deadline time.Time) {
	t.Helper()
	for debug.SetMemoryLimit(-1) != limit || Read().GOGC != percent {
		if time.Now().After(deadline) {
			t.Fatalf("after the end: limit %d, GC percent %d; want the ones before (%d, %d)", debug.SetMemoryLimit(-1), Read().GOGC, limit, percent)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
