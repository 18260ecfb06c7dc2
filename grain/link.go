package grain

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"lazy/api"
	"lazy/grain/grainpb"
)

// Window is how far a call's send time may be from the receiving member's
// clock, either way: a call sent longer ago (or, by a clock ahead, later) is
// refused. It bounds how long a member remembers a call's nonce, and it is
// the clock skew members tolerate: keep the members' clocks in step (NTP) to
// well within it.
const Window = 2 * time.Minute

// MaxSeen bounds the nonces a member remembers (those of the calls and
// events it took within the last Window). Past it, a call is refused rather
// than a nonce forgotten early; only a member, which holds the secret, can
// fill it (a thousand calls a second for the whole window).
const MaxSeen = 1 << 18

// nonceLen is the length of a call's nonce.
const nonceLen = 16

// sweepEvery is how often the remembered nonces are swept of expired ones.
const sweepEvery = 10 * time.Second

// Why a call or event is refused.
var (
	ErrUnsigned  = errors.New("task grain call refused: it is not signed with this cluster's secret (is every member on the same storage.dsn, and of the same lazy version?)")
	ErrOtherTask = errors.New("task grain call refused: it was signed for another task (a call captured and re-aimed?)")
	ErrStale     = errors.New("task grain call refused: it was sent outside the time window")
	ErrReplayed  = errors.New("task grain call refused: this member took a call with the same nonce already (a replayed call?)")
	ErrFull      = errors.New("task grain call refused: this member remembers too many calls of the last window; try again in a minute")
)

// Link signs what a member sends to the others and checks what it receives.
// A call is bound to the task it is for, a random nonce and the time it was
// sent; the receiving member refuses a call for another task than the grain
// it reaches, one sent more than Window from its own clock, and one whose
// nonce it has seen within the window. Events are bound to a nonce and a
// time the same way.
//
// The nonces seen are this member's, in memory: a member that restarts, or a
// task that moves to another member, forgets them, so a call captured on the
// way to it could be taken once more there within its window. That is
// accepted: the links between members are mutual TLS where configured (a
// capture needs a member's key), the window is two minutes, and the task
// actor's own state refuses a decision twice (an accept or a cancel of a
// task that has ended); a comment or an unblock would be taken again.
type Link struct {
	secret []byte
	now    func() time.Time

	mu      sync.Mutex
	seen    map[string]time.Time // nonce -> when it falls out of the window
	sweptAt time.Time
}

// NewLink makes a member's link with the cluster's secret; now is its clock
// (nil: time.Now).
func NewLink(secret []byte, now func() time.Time) *Link {
	if now == nil {
		now = time.Now
	}
	return &Link{secret: secret, now: now, seen: map[string]time.Time{}}
}

// Encode wraps msg for the grain of task, waiting timeout for its reply,
// signed and bound to task, a fresh nonce and now.
func (l *Link) Encode(msg any, task string, timeout time.Duration) (*grainpb.Call, error) {
	name, body, err := marshal(msg)
	if err != nil {
		return nil, err
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, err
	}
	c := &grainpb.Call{Type: name, Body: body, TimeoutMs: timeout.Milliseconds(), Task: task, Nonce: nonce, SentMs: l.now().UnixMilli()}
	c.Mac = l.signCall(c)
	return c, nil
}

// Decode checks a call that reached the grain of task and unwraps its
// message: its signature, its task, its time and its nonce, in that order.
// A call that passes is remembered: the same call again is refused.
func (l *Link) Decode(c *grainpb.Call, task string) (any, error) {
	if !hmac.Equal(c.GetMac(), l.signCall(c)) {
		return nil, ErrUnsigned
	}
	if c.GetTask() != task {
		return nil, fmt.Errorf("%w: it is for task %s, this is task %s", ErrOtherTask, c.GetTask(), task)
	}
	if err := l.remember(c.GetNonce(), c.GetSentMs()); err != nil {
		return nil, err
	}
	return unmarshal(c.GetType(), c.GetBody())
}

// EncodeEvent wraps a task or traffic event for the other members, signed
// and bound to a fresh nonce and now.
func (l *Link) EncodeEvent(e api.Event) (*grainpb.Event, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, err
	}
	ev := &grainpb.Event{Body: body, Nonce: nonce, SentMs: l.now().UnixMilli()}
	ev.Mac = l.signEvent(ev)
	return ev, nil
}

// DecodeEvent checks an event's signature, time and nonce and unwraps it.
func (l *Link) DecodeEvent(ev *grainpb.Event) (api.Event, error) {
	var e api.Event
	if !hmac.Equal(ev.GetMac(), l.signEvent(ev)) {
		return e, errors.New("event refused: it is not signed with this cluster's secret")
	}
	if err := l.remember(ev.GetNonce(), ev.GetSentMs()); err != nil {
		return e, fmt.Errorf("event refused: %w", err)
	}
	err := json.Unmarshal(ev.GetBody(), &e)
	return e, err
}

// remember checks a signed call's time against this member's clock and
// records its nonce, refusing one seen within the window.
func (l *Link) remember(nonce []byte, sentMs int64) error {
	now := l.now()
	sent := time.UnixMilli(sentMs)
	if d := now.Sub(sent); d > Window || d < -Window {
		return fmt.Errorf("%w: sent at %s, %s from this member's clock (%s), more than %s (a replayed call, or the members' clocks differ: keep them in step with NTP)",
			ErrStale, sent.UTC().Format(time.RFC3339), d.Round(time.Second).Abs(), now.UTC().Format(time.RFC3339), Window)
	}
	if len(nonce) != nonceLen {
		return fmt.Errorf("%w (it carries no nonce)", ErrUnsigned)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweptAt) >= sweepEvery || now.Before(l.sweptAt) {
		for n, until := range l.seen {
			if now.After(until) {
				delete(l.seen, n)
			}
		}
		l.sweptAt = now
	}
	if until, ok := l.seen[string(nonce)]; ok && !now.After(until) {
		return fmt.Errorf("%w: it was sent at %s", ErrReplayed, sent.UTC().Format(time.RFC3339))
	}
	if len(l.seen) >= MaxSeen {
		return ErrFull
	}
	// past sent+Window the call is stale here anyway: it can be forgotten
	l.seen[string(nonce)] = sent.Add(Window)
	return nil
}

func newNonce() ([]byte, error) {
	n := make([]byte, nonceLen)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("make a call's nonce: %w", err)
	}
	return n, nil
}

// signCall is the MAC of every field of a call but the MAC, each length
// prefixed, after a label that keeps a call's MAC from passing as an event's.
func (l *Link) signCall(c *grainpb.Call) []byte {
	m := hmac.New(sha256.New, l.secret)
	field(m, []byte("lazy task call v2"))
	field(m, []byte(c.GetType()))
	field(m, c.GetBody())
	integer(m, c.GetTimeoutMs())
	field(m, []byte(c.GetTask()))
	field(m, c.GetNonce())
	integer(m, c.GetSentMs())
	return m.Sum(nil)
}

func (l *Link) signEvent(ev *grainpb.Event) []byte {
	m := hmac.New(sha256.New, l.secret)
	field(m, []byte("lazy event v2"))
	field(m, ev.GetBody())
	field(m, ev.GetNonce())
	integer(m, ev.GetSentMs())
	return m.Sum(nil)
}

func field(m hash.Hash, b []byte) {
	integer(m, int64(len(b)))
	m.Write(b)
}

func integer(m hash.Hash, v int64) {
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(v))
	m.Write(t[:])
}
