// Package memlimit keeps the daemon's memory near what it uses. Go's
// collector lets the heap grow to twice what was live at the last
// collection (GOGC=100). Most of a small daemon's live heap is its
// libraries' tables (regular expressions, lexers, descriptors), which never
// change, so under a burst of calls the process held twice them as well,
// and kept what a burst grew to until the scavenger gave it back: 37–41 MB
// after a load of three providers' streams, where 29 MB served one.
//
// Follow sets a soft memory limit (runtime/debug.SetMemoryLimit): a floor
// of a few tens of MB while the daemon is small, and, once the daemon holds
// more, what GOGC=100 would let it grow to with a margin, so the limit
// never makes the collector run more often than the default would. It is
// read again every interval; between two reads the limit is soft (the
// runtime goes over it rather than collect without end, and spends at most
// half the CPU on it).
//
// While the daemon is small, Follow also raises GOGC (Percent) so the heap
// grows to what the floor leaves it before it is collected, not to twice
// the live heap: a task's model calls allocate ~10 KB each, and a daemon of
// 7 MB live collected every 8 MB of them (about every 800 calls under load,
// 2-3 ms of marking each). Memory stays what the floor allows, and a daemon
// whose heap outgrows it collects as Go's default (GOGC=100) would.
//
// A GOMEMLIMIT in the environment is the user's word: Follow then sets
// nothing. A GOGC in the environment is too: Follow then sets the limit
// only, from the GOGC in force.
package memlimit

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Floor is the limit of a small daemon: 32 MiB of the Go runtime's
// memory (heap, stacks and its own), about 36 MB of resident memory.
const Floor = 32 << 20

// margin: the limit is what GOGC lets the runtime reach and 1/margin more
// (the runtime aims its collections a few percent under the limit).
const margin = 16

// Interval is how often Follow reads the live heap.
const Interval = time.Second

// Usage is what the runtime said at its last collection.
type Usage struct {
	Live    uint64 // heap bytes live after the last collection
	Stacks  uint64 // goroutine stacks scanned
	Globals uint64 // globals scanned
	GOGC    uint64 // the percent in force (0: off)
	// NonHeap is the runtime's memory that is not the heap: stacks, its
	// metadata, profiling buckets and the like
	NonHeap uint64
}

// scanned is what a collection counts toward the next one's goal: the live
// heap, the stacks and the globals.
func (u Usage) scanned() uint64 { return u.Live + u.Stacks + u.Globals }

// goal is the heap size at which GOGC=percent would collect u's heap.
func (u Usage) goal(percent uint64) uint64 { return u.Live + u.scanned()*percent/100 }

// room is the heap floor leaves u: the floor less the limit's margin (Limit
// adds a sixteenth) and the memory beside the heap (0 when none is left).
func (u Usage) room(floor int64) uint64 {
	room := uint64(max(floor, 0)) * margin / (margin + 1)
	if room <= u.NonHeap {
		return 0
	}
	return room - u.NonHeap
}

// Limit is the soft limit for u: what GOGC would let the heap reach, and
// the memory beside the heap, with a sixteenth more, or floor when that is
// less. With GOGC off (a user's GOGC=off) there is no limit.
func Limit(u Usage, floor int64) int64 {
	if u.GOGC == 0 {
		return math.MaxInt64
	}
	want := u.goal(u.GOGC) + u.NonHeap
	want += want / margin
	if want > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(int64(want), floor)
}

var names = []string{
	"/gc/heap/live:bytes",
	"/gc/scan/stack:bytes",
	"/gc/scan/globals:bytes",
	"/gc/gogc:percent",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// MaxPercent bounds Percent: a daemon of a few MB live collects at least
// every ten times its live heap.
const MaxPercent = 1000

// Percent is the GOGC for u that lets the heap grow to what floor leaves it:
// the floor less the limit's margin and the memory beside the heap, so that
// Limit at that percent is the floor. Once GOGC=100 reaches that, it is 100
// (Go's default: a larger daemon is collected as it would be); never more
// than MaxPercent.
func Percent(u Usage, floor int64) uint64 {
	room := u.room(floor)
	if room <= u.goal(100) {
		return 100
	}
	if u.scanned() == 0 {
		return MaxPercent
	}
	return min(max((room-u.Live)*100/u.scanned(), 100), MaxPercent)
}

// Read is the runtime's Usage now.
func Read() Usage {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	heap := v(5) + v(6) + v(7) + v(8)
	u := Usage{Live: v(0), Stacks: v(1), Globals: v(2), GOGC: v(3)}
	if total := v(4); total > heap {
		u.NonHeap = total - heap
	}
	return u
}

// Follow sets the limit (and, unless the environment sets GOGC, the GC
// percent) now and again every Interval until ctx ends, then puts back what
// it found. It returns at once; with GOMEMLIMIT set it does nothing and says
// so (false).
func Follow(ctx context.Context, floor int64) bool {
	if os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	tune := os.Getenv("GOGC") == ""
	percentBefore := -1
	set := func() {
		u := Read()
		if tune {
			pct := Percent(u, floor)
			if old := debug.SetGCPercent(int(pct)); percentBefore < 0 {
				percentBefore = old
			}
			u.GOGC = pct
		}
		debug.SetMemoryLimit(Limit(u, floor))
	}
	before := debug.SetMemoryLimit(-1)
	set()
	go func() {
		t := time.NewTicker(Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if percentBefore >= 0 {
					debug.SetGCPercent(percentBefore)
				}
				debug.SetMemoryLimit(before)
				return
			case <-t.C:
				set()
			}
		}
	}()
	return true
}
