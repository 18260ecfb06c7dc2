package actors

// The durable local outbox: the end of an agent turn (work or ask) that
// the store could not take when it ended, kept on this machine's disk
// until the store has it. One file per task (a task runs one job at a
// time) in the daemon's state directory (api.Paths.Outbox, 0700, hidden from
// every sandbox with the rest of the lazy home), written atomically: a
// temporary file, fsync, rename over the task's file, fsync of the
// directory. A file is removed once the turn's end is recorded in the
// store. What reads it is task_store.go (replay on the task's next load);
// a file that does not parse is set aside beside the others
// (<task>.json.bad-<time>), reported, never fatal.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"lazy/agent"
)

// outboxVersion is the version of heldEnd files this daemon writes and
// reads; a file of another version is set aside.
const outboxVersion = 1

// maxHeldEnd bounds an outbox file as read (a turn's output is in it).
const maxHeldEnd = 64 << 20

// heldEnd is one turn's end waiting in the outbox for the store: what
// completeJob needs to record it as the job ended.
type heldEnd struct {
	Version int    `json:"version"`
	TaskID  string `json:"task_id"`
	Kind    string `json:"kind"` // "work" or "ask" (jobKind.String)
	TurnID  string `json:"turn_id"`
	Turn    int    `json:"turn"` // its number, for the words
	Label   string `json:"label"`
	// SetupID is the setup turn the work turn ran first ("" : none)
	SetupID string `json:"setup_id,omitempty"`
	// CommentID is the question an ask turn answers
	CommentID string `json:"comment_id,omitempty"`
	// LeaseEpoch is the task's lease the turn ran under (0: no lease)
	LeaseEpoch int64     `json:"lease_epoch,omitempty"`
	EndedAt    time.Time `json:"ended_at"`
	// Launched: the agent process started; Delivered are the comments its
	// prompt carried (delivered at the launch)
	Launched   bool       `json:"launched"`
	LaunchedAt *time.Time `json:"launched_at,omitempty"`
	Delivered  []string   `json:"delivered,omitempty"`

	// the agent's result and process outcome
	Text      string `json:"text"`
	SessionID string `json:"session_id,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	Driver    string `json:"driver,omitempty"`
	Command   string `json:"command,omitempty"`
	Notice    string `json:"notice,omitempty"`
	Stdout    []byte `json:"stdout,omitempty"`
	Stderr    []byte `json:"stderr,omitempty"`
	HasOutput bool   `json:"has_output,omitempty"`
	ExitCode  int    `json:"exit_code,omitempty"`
	// Err is the job's error as text ("" : none); ErrIs names the sentinel
	// it wrapped ("timeout", "unavailable"), which words an ask's failure
	Err         string `json:"err,omitempty"`
	ErrIs       string `json:"err_is,omitempty"`
	Undone      string `json:"undone,omitempty"`
	SetupOut    string `json:"setup_out,omitempty"`
	SetupFailed bool   `json:"setup_failed,omitempty"`
	// the job's push of the task branch (cluster): PushTried, PushErr
	// ("" : it landed), the head it pushed
	PushTried bool   `json:"push_tried,omitempty"`
	PushErr   string `json:"push_err,omitempty"`
	PushHead  string `json:"push_head,omitempty"`
}

// heldErr is a held job's error read back: its text, and the sentinel it
// wrapped when it was written.
type heldErr struct {
	text string
	is   error
}

func (e *heldErr) Error() string { return e.text }
func (e *heldErr) Unwrap() error { return e.is }

// sentinels are the errors a held end names by word.
var sentinels = map[string]error{"timeout": agent.ErrTimeout, "unavailable": agent.ErrUnavailable}

// newHeldEnd is what the outbox keeps of job j's end r.
func newHeldEnd(taskID string, j *job, r jobResult, epoch int64, now time.Time) *heldEnd {
	e := &heldEnd{Version: outboxVersion, TaskID: taskID, Kind: j.kind().String(), Label: j.label, LeaseEpoch: epoch, EndedAt: now,
		Launched: j.launched, Delivered: append([]string(nil), j.delivered...),
		Text: r.result.Text, SessionID: r.result.SessionID, IsError: r.result.IsError, Driver: r.result.Driver, Command: r.result.Command,
		Notice: r.result.Notice, Stdout: r.outcome.Stdout, Stderr: r.outcome.Stderr, ExitCode: r.outcome.ExitCode,
		HasOutput: r.outcome.Stdout != nil || r.outcome.Stderr != nil,
		Undone:    r.undone, SetupOut: r.setupOut, SetupFailed: r.setupFailed,
		PushTried: r.push.tried, PushHead: r.push.head}
	if j.turn != nil {
		e.TurnID, e.Turn = j.turn.ID, j.turn.Number
	}
	if j.launched {
		at := j.launchedAt
		e.LaunchedAt = &at
	}
	if j.setup != nil {
		e.SetupID = j.setup.ID
	}
	if a, ok := j.spec.(askSpec); ok {
		e.CommentID = a.commentID
	}
	if r.err != nil {
		e.Err = r.err.Error()
		for word, s := range sentinels {
			if errors.Is(r.err, s) {
				e.ErrIs = word
			}
		}
	}
	if r.push.err != nil {
		e.PushErr = r.push.err.Error()
	}
	return e
}

// result is the job's end as the actor held it.
func (e *heldEnd) result() jobResult {
	r := jobResult{
		result:  agent.Result{Text: e.Text, SessionID: e.SessionID, IsError: e.IsError, Driver: e.Driver, Command: e.Command, Notice: e.Notice},
		outcome: agent.Outcome{ExitCode: e.ExitCode},
		undone:  e.Undone, setupOut: e.SetupOut, setupFailed: e.SetupFailed,
		push: pushTry{tried: e.PushTried, head: e.PushHead},
	}
	if e.HasOutput {
		r.outcome.Stdout, r.outcome.Stderr = nonNil(e.Stdout), e.Stderr
	}
	if e.Err != "" {
		r.err = &heldErr{text: e.Err, is: sentinels[e.ErrIs]}
	}
	if e.PushErr != "" {
		r.push.err = errors.New(e.PushErr)
	}
	return r
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// validOutboxID: a task id as the daemon makes them (a UUID), safe as a
// file name.
func validOutboxID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}

// parseHeldEnd reads an outbox file's bytes, for task taskID: a heldEnd of
// this version, about that task, of an agent turn, or an error saying what
// is wrong with it.
func parseHeldEnd(b []byte, taskID string) (*heldEnd, error) {
	if len(b) > maxHeldEnd {
		return nil, fmt.Errorf("%d bytes, over the %d an outbox entry may have", len(b), maxHeldEnd)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var e heldEnd
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("not an outbox entry: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not an outbox entry: more after its JSON object")
	}
	switch {
	case e.Version != outboxVersion:
		return nil, fmt.Errorf("outbox entry version %d, this daemon reads %d", e.Version, outboxVersion)
	case e.TaskID != taskID:
		return nil, fmt.Errorf("the entry is about task %q, its file is named for %q", e.TaskID, taskID)
	case e.Kind != jobWork.String() && e.Kind != jobAsk.String():
		return nil, fmt.Errorf("the entry's job kind %q is not an agent turn", e.Kind)
	case e.TurnID == "":
		return nil, errors.New("the entry names no turn")
	case e.Kind == jobAsk.String() && e.CommentID == "":
		return nil, errors.New("the ask entry names no question")
	case e.ErrIs != "" && sentinels[e.ErrIs] == nil:
		return nil, fmt.Errorf("the entry's error kind %q is unknown", e.ErrIs)
	}
	return &e, nil
}

// outbox is the daemon's outbox directory ("" : none, ends are held in
// memory only).
type outbox string

func (o outbox) on() bool { return o != "" }

func (o outbox) path(taskID string) string { return filepath.Join(string(o), taskID+".json") }

// write replaces the task's entry with e, atomically and durably.
func (o outbox) write(e *heldEnd) error {
	if !validOutboxID(e.TaskID) {
		return fmt.Errorf("write the outbox entry: task id %q is not a file name", e.TaskID)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("write the outbox entry: %w", err)
	}
	if err := os.MkdirAll(string(o), 0o700); err != nil {
		return fmt.Errorf("write the outbox entry: %w", err)
	}
	f, err := os.CreateTemp(string(o), ".tmp-"+e.TaskID+"-*")
	if err != nil {
		return fmt.Errorf("write the outbox entry: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write the outbox entry: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the outbox entry: %w", err)
	}
	if err := os.Rename(tmp, o.path(e.TaskID)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the outbox entry: %w", err)
	}
	return o.syncDir()
}

func (o outbox) syncDir() error {
	d, err := os.Open(string(o))
	if err != nil {
		return fmt.Errorf("sync the outbox directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync the outbox directory: %w", err)
	}
	return nil
}

// badEntry is an outbox file that does not parse.
type badEntry struct {
	path string
	err  error
}

func (e *badEntry) Error() string { return fmt.Sprintf("outbox file %s: %v", e.path, e.err) }
func (e *badEntry) Unwrap() error { return e.err }

// read is the task's entry (nil: none). A file that cannot be parsed is a
// *badEntry: the caller sets it aside.
func (o outbox) read(taskID string) (*heldEnd, error) {
	if !o.on() || !validOutboxID(taskID) {
		return nil, nil
	}
	p := o.path(taskID)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &badEntry{path: p, err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &badEntry{path: p, err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &badEntry{path: p, err: fmt.Errorf("not a regular file (%s)", fi.Mode().Type())}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHeldEnd+1))
	if err != nil {
		return nil, &badEntry{path: p, err: err}
	}
	e, err := parseHeldEnd(b, taskID)
	if err != nil {
		return nil, &badEntry{path: p, err: err}
	}
	return e, nil
}

// remove removes the task's entry (none: nothing to do).
func (o outbox) remove(taskID string) error {
	if !o.on() || !validOutboxID(taskID) {
		return nil
	}
	if err := os.Remove(o.path(taskID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the outbox entry: %w", err)
	}
	return o.syncDir()
}

// setAside renames the task's unreadable entry out of the way, and says
// where it went.
func (o outbox) setAside(taskID string, now time.Time) (string, error) {
	to := o.path(taskID) + ".bad-" + strings.ReplaceAll(now.UTC().Format("20060102T150405.000000000"), ".", "")
	if err := os.Rename(o.path(taskID), to); err != nil {
		return "", fmt.Errorf("set the unreadable outbox entry aside: %w", err)
	}
	return to, o.syncDir()
}

// OutboxTasks lists the tasks whose turn ends wait in the outbox at dir
// (the daemon says so at start: each is recorded, or discarded, when the
// daemon loads its task).
func OutboxTasks(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var ids []string
	for _, f := range files {
		if id := strings.TrimSuffix(filepath.Base(f), ".json"); validOutboxID(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// HeldTurns are the turns whose end the outbox at dir keeps for task
// taskID (the agent turn and the setup turn it ran first; none when the
// entry is missing or unreadable): a daemon's start-up leaves them running
// for the task's actor, which records them from the entry.
func HeldTurns(dir, taskID string) []string {
	e, err := outbox(dir).read(taskID)
	if err != nil || e == nil {
		return nil
	}
	if e.SetupID != "" {
		return []string{e.TurnID, e.SetupID}
	}
	return []string{e.TurnID}
}
