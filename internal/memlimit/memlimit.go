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
// A GOMEMLIMIT in the environment is the user's word: Follow then sets
// nothing.
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

// Limit is the soft limit for u: what GOGC would let the heap reach, and
// the memory beside the heap, with a sixteenth more, or floor when that is
// less. With GOGC off (a user's GOGC=off) there is no limit.
func Limit(u Usage, floor int64) int64 {
	if u.GOGC == 0 {
		return math.MaxInt64
	}
	goal := u.Live + (u.Live+u.Stacks+u.Globals)*u.GOGC/100
	want := goal + u.NonHeap
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

// Follow sets the limit now and again every Interval until ctx ends, then
// puts back the limit it found. It returns at once; with GOMEMLIMIT set it
// does nothing and says so (false).
func Follow(ctx context.Context, floor int64) bool {
	if os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	before := debug.SetMemoryLimit(Limit(Read(), floor))
	go func() {
		t := time.NewTicker(Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				debug.SetMemoryLimit(before)
				return
			case <-t.C:
				debug.SetMemoryLimit(Limit(Read(), floor))
			}
		}
	}()
	return true
}
