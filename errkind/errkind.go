// Package errkind is the one list of what a domain error is: each error
// the daemon refuses with (a task not found, a busy agent, a refused accept,
// a wrong passphrase, …) carries one Kind, and every place that answers by
// it — the web's status (httpapi.Status), the cluster codec (package grain)
// and the RPC client (client.Error, the remote store) — switches on this
// list, never on the domain packages' own types. It is a leaf: it imports
// the standard library alone, so the domain packages (task, review,
// approval, gitx, store, actors) and the client can all use it.
package errkind

import "errors"

// Kind is what a domain error is. Its string is the wire name (the RPC
// error body's "kind", the cluster codec's error kind) and never changes.
type Kind string

// The kinds. A new one is added to All, and httpapi's status table must
// answer it (a test fails otherwise).
const (
	Other           Kind = ""                 // not a domain error: a 500
	Refusal         Kind = "refusal"          // a refused accept, with its remedy
	Rule            Kind = "rule"             // refused by a review rule
	Busy            Kind = "busy"             // the operation needs the task idle
	TooLarge        Kind = "too_large"        // over a size bound
	Ended           Kind = "ended"            // the task has ended
	Locked          Kind = "locked"           // its worktree is locked
	NotFound        Kind = "not_found"        // no such record
	Conflict        Kind = "conflict"         // already exists
	Ambiguous       Kind = "ambiguous"        // a ref matches several tasks
	WrongPassphrase Kind = "wrong_passphrase" // the approval passphrase is wrong
	Wait            Kind = "wait"             // guessing the passphrase must wait
	BadCall         Kind = "bad_call"         // a call with missing or unknown arguments
	ReadOnly        Kind = "read_only"        // a write asked of a read-only surface
	Unavailable     Kind = "unavailable"      // the store does not answer
)

// All is every kind but Other.
var All = []Kind{Refusal, Rule, Busy, TooLarge, Ended, Locked, NotFound, Conflict, Ambiguous, WrongPassphrase, Wait, BadCall, ReadOnly, Unavailable}

// Kinded is an error that says its kind.
type Kinded interface{ ErrorKind() Kind }

// Of is the kind of err: that of the first error in its chain that says
// one, else Other.
func Of(err error) Kind {
	var k Kinded
	if errors.As(err, &k) {
		return k.ErrorKind()
	}
	return Other
}

// Parse reads a kind from the wire; a name this build does not know (a
// newer peer) is Other.
func Parse(s string) Kind {
	for _, k := range All {
		if string(k) == s {
			return k
		}
	}
	return Other
}

// Error is an error of one kind in words: a domain package's sentinel
// (New), or an error that crossed a process boundary (the RPC, another
// member of a cluster) and kept its kind.
type Error struct {
	Kind Kind
	Msg  string
}

// New makes a sentinel of kind k.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Msg: msg} }

func (e *Error) Error() string { return e.Msg }

// ErrorKind is its kind.
func (e *Error) ErrorKind() Kind { return e.Kind }

// Is matches another Error of the same kind: an error that came from
// another process is still errors.Is the domain's sentinel of its kind
// (store.ErrNotFound, actors.ErrEnded, …).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && e.Kind != Other
}
