// Package task owns task identity: full ids (UUIDv7 as 32 hex), short ids,
// codes, the task ref a grant carries, statuses, and the one resolution rule
// used by the CLI, the routes and the RPC. It does no I/O.
package task

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"lazy/errkind"
)

// Status of a task.
type Status string

// Task statuses (CONTRACT §2).
const (
	Running   Status = "running"   // a work turn is in progress
	Blocked   Status = "blocked"   // the turn ended; waiting for a human
	Conflict  Status = "conflict"  // a sync hit merge conflicts
	Accepted  Status = "accepted"  // merged; the task has ended
	Failed    Status = "failed"    // a work turn could not run or crashed
	Cancelled Status = "cancelled" // ended by the operator
)

// Statuses lists every status, in display order.
var Statuses = []Status{Running, Blocked, Conflict, Failed, Accepted, Cancelled}

// Ended reports whether a task in status s has ended (its grants are revoked).
func (s Status) Ended() bool { return s == Accepted || s == Cancelled }

// NeedsReviewer reports whether a task in status s waits for a human: it is
// blocked, conflicted or failed (the Tasks page lists these first).
func (s Status) NeedsReviewer() bool { return s == Blocked || s == Conflict || s == Failed }

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// NewID returns a fresh full id: a UUIDv7 written as 32 lowercase hex.
func NewID(now time.Time) string { return idAt(now.UnixMilli()) }

// shortIDSpan is how long one short id lasts: the short id is the top 32 of
// the UUIDv7's 48 timestamp bits, so it changes every 2^16 ms.
const shortIDSpan = 1 << 16

// NewTaskID returns a fresh full id whose short id is not taken. A short id
// is the id's first 8 characters (CONTRACT §2), which is the top of the
// UUIDv7's millisecond timestamp, so two tasks made within the same ~65 s
// would share one. When the short id is taken, the timestamp moves forward by
// one span until it is free: RFC 9562 §6.1 lets an implementation alter the
// timestamp, ids stay time-ordered, and every task's short id and branch
// (lazy/<short id>) are its own.
func NewTaskID(now time.Time, taken func(short string) bool) (string, error) {
	ms := now.UnixMilli()
	for i := 0; i < 1<<16; i++ {
		id := idAt(ms + int64(i)*shortIDSpan)
		if !taken(ShortID(id)) {
			return id, nil
		}
	}
	return "", fmt.Errorf("no free short id after 65536 tries: the project holds too many tasks made at once")
}

func idAt(ms int64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(ms)<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	b[6] = (b[6] & 0x0f) | 0x70 // version 7
	b[8] = (b[8] & 0x3f) | 0x80 // RFC 4122 variant
	return hex.EncodeToString(b[:])
}

// ShortID is the first 8 characters of a full id.
func ShortID(id string) string {
	if len(id) < 8 {
		return id
	}
	return id[:8]
}

var (
	codeRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,39}$`)
	fullIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hexRE    = regexp.MustCompile(`^[0-9a-f]+$`)
)

// ValidCode checks a task code and says what is wrong.
func ValidCode(code string) error {
	if !codeRE.MatchString(code) {
		return fmt.Errorf("task code %q is not valid: start with a letter, then up to 39 letters, digits, '.', '_' or '-'", code)
	}
	return nil
}

// IsFullID reports whether s has the shape of a full id.
func IsFullID(s string) bool { return fullIDRE.MatchString(s) }

// Ref is what a grant carries: the code, or the short id when there is none.
func Ref(id, code string) string {
	if code != "" {
		return code
	}
	return ShortID(id)
}

// MinPrefix is the shortest hex prefix accepted when resolving a task.
const MinPrefix = 4

// Ident is the identity of one task, as resolution needs it.
type Ident struct{ ID, Code string }

// Resolve finds the one task that input names: exact full id, then exact
// code, then exact short id, then a unique hex prefix of at least MinPrefix
// characters. Ambiguous or unknown input is an error naming the candidates.
func Resolve(input string, all []Ident) (Ident, error) {
	in := strings.TrimSpace(input)
	if in == "" {
		return Ident{}, fmt.Errorf("no task given: name a task by its code, short id or full id (see `lazy task list`)")
	}
	for _, t := range all {
		if t.ID == in {
			return t, nil
		}
	}
	for _, t := range all {
		if t.Code != "" && t.Code == in {
			return t, nil
		}
	}
	for _, t := range all {
		if ShortID(t.ID) == in {
			return t, nil
		}
	}
	low := strings.ToLower(in)
	if len(low) >= MinPrefix && hexRE.MatchString(low) {
		var hits []Ident
		for _, t := range all {
			if strings.HasPrefix(t.ID, low) {
				hits = append(hits, t)
			}
		}
		if len(hits) == 1 {
			return hits[0], nil
		}
		if len(hits) > 1 {
			names := make([]string, len(hits))
			for i, h := range hits {
				names[i] = Ref(h.ID, h.Code) + " (" + h.ID + ")"
			}
			sort.Strings(names)
			return Ident{}, &AmbiguousError{Input: in, Candidates: names}
		}
	}
	return Ident{}, &NotFoundError{Input: in}
}

// NotFoundError says no task matches.
type NotFoundError struct{ Input string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no task matches %q: use a code, a short id, a full id or a hex prefix of at least %d characters (see `lazy task list`)", e.Input, MinPrefix)
}

// ErrorKind is errkind.NotFound.
func (e *NotFoundError) ErrorKind() errkind.Kind { return errkind.NotFound }

// AmbiguousError says several tasks match a prefix.
type AmbiguousError struct {
	Input      string
	Candidates []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q matches %d tasks: %s; type more characters", e.Input, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// ErrorKind is errkind.Ambiguous.
func (e *AmbiguousError) ErrorKind() errkind.Kind { return errkind.Ambiguous }
