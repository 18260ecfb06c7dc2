package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"lazy/review"
)

// File is the file store: one JSON-lines file per task under its directory.
// Every write appends one record and fsyncs before returning; the newest
// record of an id wins on load. A torn last line (a crash mid-append) is
// dropped and cut off on open. All records are also kept in memory.
type File struct {
	dir  string
	sync bool // fsync each append (WithSync)
	mu   sync.Mutex
	t    map[string]*fileTask
	// tries are the wrong passphrases by name (triesFile, rewritten whole)
	tries map[string]passphraseTries
}

// triesFile keeps the wrong passphrases counted (not a .jsonl: no task's).
const triesFile = "passphrase-tries.json"

type passphraseTries struct {
	Wrong int       `json:"wrong"`
	Until time.Time `json:"until"`
}

var _ Store = (*File)(nil)

type fileTask struct {
	task      Task
	turns     []Turn // by Number
	comments  []Comment
	reviews   []review.ReviewComment // by CreatedAt
	approvals []Approval
	usage     []UsageCall
	egress    []EgressCall
	scripts   []Transcript // turn transcripts, by turn
	marks     reviewMarks  // the review state (file_reviewstate.go)
}

// launchRecord is MarkLaunched as one record, so it lands whole or not at all.
// answerRecord is an ask's reply and its answered state, one record.
type answerRecord struct {
	AskID string               `json:"ask_id"`
	Reply review.ReviewComment `json:"reply"`
}

type launchRecord struct {
	TurnID    string    `json:"turn_id"`
	At        time.Time `json:"at"`
	Delivered []string  `json:"delivered"`
}

type record struct {
	Kind string          `json:"k"` // task | turn | comment | review | approval | usage | egress | transcript
	V    json.RawMessage `json:"v"`
}

// OpenFile opens (creating if needed) the file store in dir.
func OpenFile(dir string, opts ...Option) (*File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create file store %s: %w", dir, err)
	}
	f := &File{dir: dir, t: map[string]*fileTask{}, sync: options(opts).sync}
	names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := f.load(n); err != nil {
			return nil, err
		}
	}
	f.tries = map[string]passphraseTries{}
	if b, err := os.ReadFile(filepath.Join(dir, triesFile)); err == nil {
		if err := json.Unmarshal(b, &f.tries); err != nil {
			return nil, fmt.Errorf("file store %s: %w (the count of wrong passphrases is damaged: delete the file to start it again)", filepath.Join(dir, triesFile), err)
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("read %s: %w", triesFile, err)
	}
	return f, nil
}

func (f *File) load(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	good := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var ft *fileTask
	for sc.Scan() {
		line := sc.Bytes()
		end := good + len(line) + 1
		if end > len(b) { // no newline: the last append was cut short
			break
		}
		var r record
		if json.Unmarshal(line, &r) != nil {
			break
		}
		if ft == nil && r.Kind != "task" {
			return fmt.Errorf("file store %s: first record is %q, not the task; the file is damaged, move it aside", path, r.Kind)
		}
		if ft == nil {
			ft = &fileTask{}
		}
		if err := ft.apply(r); err != nil {
			return fmt.Errorf("file store %s: %w", path, err)
		}
		good = end
	}
	if good < len(b) {
		if err := os.Truncate(path, int64(good)); err != nil {
			return fmt.Errorf("cut the torn tail of %s: %w", path, err)
		}
	}
	if ft != nil {
		f.t[ft.task.ID] = ft
	}
	return nil
}

func (ft *fileTask) apply(r record) error {
	switch r.Kind {
	case "task":
		return json.Unmarshal(r.V, &ft.task)
	case "turn":
		var t Turn
		if err := json.Unmarshal(r.V, &t); err != nil {
			return err
		}
		seq := 1
		for i := range ft.turns {
			if ft.turns[i].ID == t.ID {
				if t.Seq == 0 { // written before turns had a number by kind
					t.Seq = ft.turns[i].Seq
				}
				ft.turns[i] = t
				return nil
			}
			if ft.turns[i].Kind == t.Kind {
				seq++
			}
		}
		if t.Seq == 0 {
			t.Seq = seq
		}
		ft.turns = append(ft.turns, t)
	case "comment":
		var c Comment
		if err := json.Unmarshal(r.V, &c); err != nil {
			return err
		}
		ft.comments = append(ft.comments, c)
	case "review":
		var c review.ReviewComment
		if err := json.Unmarshal(r.V, &c); err != nil {
			return err
		}
		for i := range ft.reviews {
			if ft.reviews[i].ID == c.ID {
				ft.reviews[i] = c
				return nil
			}
		}
		ft.reviews = append(ft.reviews, c)
	case "answer":
		var a answerRecord
		if err := json.Unmarshal(r.V, &a); err != nil {
			return err
		}
		if c := ft.review(a.AskID); c != nil {
			c.AskState, c.AskError = review.AskAnswered, ""
		}
		ft.reviews = append(ft.reviews, a.Reply)
	case "launch":
		var l launchRecord
		if err := json.Unmarshal(r.V, &l); err != nil {
			return err
		}
		for i := range ft.turns {
			if ft.turns[i].ID != l.TurnID {
				continue
			}
			at := l.At
			ft.turns[i].StartedAt = &at
			for _, id := range l.Delivered {
				if c := ft.review(id); c != nil {
					c.DeliveryState, c.DeliveredTurn = review.Delivered, ft.turns[i].WorkNumber()
				}
			}
		}
	case "usage":
		var u UsageCall
		if err := json.Unmarshal(r.V, &u); err != nil {
			return err
		}
		ft.usage = append(ft.usage, u)
	case "transcript":
		var t Transcript
		if err := json.Unmarshal(r.V, &t); err != nil {
			return err
		}
		i := sort.Search(len(ft.scripts), func(i int) bool { return ft.scripts[i].Turn >= t.Turn })
		if i < len(ft.scripts) && ft.scripts[i].Turn == t.Turn {
			ft.scripts[i] = t
		} else {
			ft.scripts = slices.Insert(ft.scripts, i, t)
		}
	case "egress":
		var e EgressCall
		if err := json.Unmarshal(r.V, &e); err != nil {
			return err
		}
		ft.egress = append(ft.egress, e)
	case "viewed", "resolved", "seen":
		return ft.marks.apply(r)
	case "approval":
		var a Approval
		if err := json.Unmarshal(r.V, &a); err != nil {
			return err
		}
		for i := range ft.approvals {
			if ft.approvals[i].Path == a.Path && ft.approvals[i].Kind == a.Kind {
				ft.approvals[i] = a
				return nil
			}
		}
		ft.approvals = append(ft.approvals, a)
	default:
		return fmt.Errorf("unknown record kind %q", r.Kind)
	}
	return nil
}

// write appends one record to the task's file, fsyncs, then applies it.
func (f *File) write(taskID, kind string, v any, ft *fileTask) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	line, err := json.Marshal(record{Kind: kind, V: raw})
	if err != nil {
		return err
	}
	fh, err := os.OpenFile(filepath.Join(f.dir, taskID+".jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open task file: %w", err)
	}
	if _, err := fh.Write(append(line, '\n')); err != nil {
		fh.Close()
		return fmt.Errorf("append %s record: %w", kind, err)
	}
	if f.sync {
		if err := fh.Sync(); err != nil {
			fh.Close()
			return fmt.Errorf("sync %s record: %w", kind, err)
		}
	}
	if err := fh.Close(); err != nil {
		return err
	}
	return ft.apply(record{Kind: kind, V: raw})
}

func (f *File) get(id string) (*fileTask, error) {
	ft, ok := f.t[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	return ft, nil
}

// CreateTask saves a new task; a taken id or code is ErrConflict.
func (f *File) CreateTask(_ context.Context, t *Task) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.t[t.ID]; ok {
		return fmt.Errorf("create task: %w", ErrConflict)
	}
	if t.Code != nil {
		for _, o := range f.t {
			if o.task.Code != nil && *o.task.Code == *t.Code {
				return fmt.Errorf("create task: code %s: %w", *t.Code, ErrConflict)
			}
		}
	}
	if strings.ContainsAny(t.ID, "/\\.") || t.ID == "" {
		return fmt.Errorf("create task: bad id %q", t.ID)
	}
	ft := &fileTask{}
	if err := f.write(t.ID, "task", t, ft); err != nil {
		return err
	}
	f.t[t.ID] = ft
	return nil
}

// GetTask loads one task.
func (f *File) GetTask(_ context.Context, id string) (*Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(id)
	if err != nil {
		return nil, err
	}
	t := ft.task
	return &t, nil
}

// ListTasks lists tasks, oldest first.
func (f *File) ListTasks(context.Context) ([]Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Task, 0, len(f.t))
	for _, ft := range f.t {
		out = append(out, ft.task)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// SaveTask writes the task.
func (f *File) SaveTask(_ context.Context, t *Task) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(t.ID)
	if err != nil {
		return err
	}
	return f.write(t.ID, "task", t, ft)
}

// CreateTurn numbers and saves a turn.
func (f *File) CreateTurn(_ context.Context, t *Turn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(t.TaskID)
	if err != nil {
		return err
	}
	n, seq := 0, 0
	for _, x := range ft.turns {
		if x.Number > n {
			n = x.Number
		}
		if x.Kind == t.Kind {
			seq++
		}
	}
	t.Number, t.Seq = n+1, seq+1
	return f.write(t.TaskID, "turn", t, ft)
}

// SaveTurn writes a turn.
func (f *File) SaveTurn(_ context.Context, t *Turn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(t.TaskID)
	if err != nil {
		return err
	}
	return f.write(t.TaskID, "turn", t, ft)
}

// ListTurns lists a task's turns in order.
func (f *File) ListTurns(_ context.Context, taskID string) ([]Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	out := append([]Turn(nil), ft.turns...)
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// TurnsInState lists turns in one state, oldest first.
func (f *File) TurnsInState(_ context.Context, state string) ([]Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Turn
	for _, ft := range f.t {
		for _, t := range ft.turns {
			if t.Status == state {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].QueuedAt.Equal(out[j].QueuedAt) {
			return out[i].QueuedAt.Before(out[j].QueuedAt)
		}
		return out[i].Number < out[j].Number
	})
	return out, nil
}

// MarkLaunched appends one launch record: the turn's start and its deliveries.
func (f *File) MarkLaunched(_ context.Context, turnID string, at time.Time, delivered []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, ft := range f.t {
		for _, tu := range ft.turns {
			if tu.ID == turnID {
				return f.write(id, "launch", launchRecord{TurnID: turnID, At: at, Delivered: delivered}, ft)
			}
		}
	}
	return fmt.Errorf("turn %s: %w", turnID, ErrNotFound)
}

// AddComment saves an ordinary comment.
func (f *File) AddComment(_ context.Context, c *Comment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(c.TaskID)
	if err != nil {
		return err
	}
	return f.write(c.TaskID, "comment", c, ft)
}

// ListComments lists a task's ordinary comments.
func (f *File) ListComments(_ context.Context, taskID string) ([]Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	return append([]Comment(nil), ft.comments...), nil
}

func (ft *fileTask) review(id string) *review.ReviewComment {
	for i := range ft.reviews {
		if ft.reviews[i].ID == id {
			return &ft.reviews[i]
		}
	}
	return nil
}

// AddReviewComment saves a new review comment durably.
func (f *File) AddReviewComment(_ context.Context, c *review.ReviewComment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(c.TaskID)
	if err != nil {
		return err
	}
	for _, o := range f.t {
		if o.review(c.ID) != nil {
			return fmt.Errorf("add review comment: %w", ErrConflict)
		}
	}
	return f.write(c.TaskID, "review", c, ft)
}

// AnswerAsk appends the reply and the answered state as one record.
func (f *File) AnswerAsk(_ context.Context, askID string, reply *review.ReviewComment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.t {
		if ask := ft.review(askID); ask != nil {
			if ask.AskState != review.AskPending {
				return fmt.Errorf("ask %s is not pending: %w", askID, ErrConflict)
			}
			return f.write(ask.TaskID, "answer", answerRecord{AskID: askID, Reply: *reply}, ft)
		}
	}
	return fmt.Errorf("ask %s: %w", askID, ErrNotFound)
}

// SaveReviewComment writes the state fields onto the stored words.
func (f *File) SaveReviewComment(_ context.Context, c *review.ReviewComment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.t {
		if old := ft.review(c.ID); old != nil {
			next := *old
			next.AskState, next.AskError, next.DeliveryState, next.DeliveredTurn, next.WithdrawnAt = c.AskState, c.AskError, c.DeliveryState, c.DeliveredTurn, c.WithdrawnAt
			return f.write(old.TaskID, "review", &next, ft)
		}
	}
	return fmt.Errorf("save review comment %s: %w", c.ID, ErrNotFound)
}

// GetReviewComment loads one review comment.
func (f *File) GetReviewComment(_ context.Context, id string) (*review.ReviewComment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.t {
		if c := ft.review(id); c != nil {
			cc := *c
			return &cc, nil
		}
	}
	return nil, fmt.Errorf("review comment %s: %w", id, ErrNotFound)
}

// ListReviewComments lists a task's review comments, oldest first.
func (f *File) ListReviewComments(_ context.Context, taskID string) ([]review.ReviewComment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	out := append([]review.ReviewComment(nil), ft.reviews...)
	sortReviews(out)
	return out, nil
}

func sortReviews(cs []review.ReviewComment) {
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].CreatedAt.Equal(cs[j].CreatedAt) {
			return cs[i].CreatedAt.Before(cs[j].CreatedAt)
		}
		return cs[i].ID < cs[j].ID
	})
}

// AsksInState lists reviewer asks in one state across tasks, oldest first.
func (f *File) AsksInState(_ context.Context, state review.AskState) ([]review.ReviewComment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []review.ReviewComment
	for _, ft := range f.t {
		for _, c := range ft.reviews {
			if c.Intent == review.Ask && c.Actor == review.Human && c.AskState == state {
				out = append(out, c)
			}
		}
	}
	sortReviews(out)
	return out, nil
}

// AddApproval records an approval (idempotent).
func (f *File) AddApproval(_ context.Context, a *Approval) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(a.TaskID)
	if err != nil {
		return err
	}
	return f.write(a.TaskID, "approval", a, ft)
}

// AddUsage records model calls, a line each in its task's file.
func (f *File) AddUsage(_ context.Context, calls ...*UsageCall) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range calls {
		ft, err := f.get(u.TaskID)
		if err != nil {
			return err
		}
		if err := f.write(u.TaskID, "usage", u, ft); err != nil {
			return err
		}
	}
	return nil
}

// AddEgress records one egress connection.
func (f *File) AddEgress(_ context.Context, e *EgressCall) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(e.TaskID)
	if err != nil {
		return err
	}
	return f.write(e.TaskID, "egress", e, ft)
}

// ListEgress lists a task's egress connections, oldest first.
func (f *File) ListEgress(_ context.Context, taskID string) ([]EgressCall, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	return append([]EgressCall(nil), ft.egress...), nil
}

// SaveTranscript keeps a turn's transcript, replacing one kept before.
func (f *File) SaveTranscript(_ context.Context, t *Transcript) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(t.TaskID)
	if err != nil {
		return err
	}
	return f.write(t.TaskID, "transcript", t, ft)
}

// ListTranscripts lists a task's turn transcripts, by turn.
func (f *File) ListTranscripts(_ context.Context, taskID string) ([]Transcript, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	return append([]Transcript(nil), ft.scripts...), nil
}

// ListUsage lists a task's model calls, oldest first.
func (f *File) ListUsage(_ context.Context, taskID string) ([]UsageCall, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	return append([]UsageCall(nil), ft.usage...), nil
}

// ListApprovals lists a task's approvals.
func (f *File) ListApprovals(_ context.Context, taskID string) ([]Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	out := append([]Approval(nil), ft.approvals...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// UpdatePassphraseTries updates the wrong passphrases counted under name,
// under the store's lock, and rewrites their file (temp file, sync,
// rename) before it returns.
func (f *File) UpdatePassphraseTries(_ context.Context, name string, fn func(wrong int, until time.Time) (int, time.Time)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.tries[name]
	next := map[string]passphraseTries{}
	for k, v := range f.tries {
		next[k] = v
	}
	wrong, until := fn(cur.Wrong, cur.Until)
	if wrong <= 0 {
		delete(next, name)
	} else {
		next[name] = passphraseTries{Wrong: wrong, Until: until.UTC()}
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	path := filepath.Join(f.dir, triesFile)
	if err := writeFileSynced(path, b, f.sync); err != nil {
		return fmt.Errorf("count the passphrase tries: %w", err)
	}
	f.tries = next
	return nil
}

// writeFileSynced replaces path with b whole: a crash leaves the old file
// or the new one. With sync, the file and its directory are on disk first.
func writeFileSynced(path string, b []byte, sync bool) error {
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := fh.Write(b); err != nil {
		fh.Close()
		return err
	}
	if sync {
		if err := fh.Sync(); err != nil {
			fh.Close()
			return err
		}
	}
	if err := fh.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close releases nothing: every write is already on disk.
func (f *File) Close() error { return nil }
