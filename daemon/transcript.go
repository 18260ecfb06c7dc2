package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"lazy/agent"
	"lazy/api"
	"lazy/proxy"
	"lazy/store"
)

// transcripts keeps the transcript of each task's running turn (CONTRACT
// §17) from what the proxy read of its model calls, enriched with what the
// agent client reported on its own stream (tool results, files written:
// Client), masked as the proxy masks a call's: it sends each part to
// the task's watchers as a `transcript` event, and keeps the turn's
// transcript, bounded by api.MaxTurnTranscript, in the store when the turn
// ends. The proxy reads a reply for it only while the call's task has a
// turn running whose transcript is not full (it is kept) or a watcher.
type transcripts struct {
	st      store.Store
	log     *slog.Logger
	publish func(api.Event)
	wants   func(taskID string) bool // a watcher of the task's transcripts

	mu    sync.Mutex
	turns map[string]*liveTurn // task id → its running turn (and one just ended, until kept)
}

// liveTurn is a running turn's transcript.
type liveTurn struct {
	taskID, ref string
	tr          api.TurnTranscript
	calls       int
	tokens      int64 // of the calls that ended
	ended       bool
}

func newTranscripts(st store.Store, log *slog.Logger, publish func(api.Event), wants func(string) bool) *transcripts {
	return &transcripts{st: st, log: log, publish: publish, wants: wants, turns: map[string]*liveTurn{}}
}

// follow starts a transcript at each turn's start and keeps it at its end.
func (ts *transcripts) follow(ctx context.Context, events <-chan api.Event) {
	eachEvent(ctx, events, func(e api.Event) {
		switch e.Kind {
		case "turn_start":
			ts.mu.Lock()
			ts.turns[e.TaskID] = &liveTurn{taskID: e.TaskID, ref: e.TaskRef, tr: api.TurnTranscript{Turn: e.Turn, Calls: []api.TranscriptCall{}}}
			ts.mu.Unlock()
		case "turn_end":
			ts.end(ctx, e.TaskID, e.Turn)
		}
	})
}

// end keeps the turn's transcript (when it has one) and forgets it; until
// it is written the task's page reads it from here.
func (ts *transcripts) end(ctx context.Context, taskID string, turn int) {
	ts.mu.Lock()
	lt := ts.turns[taskID]
	if lt == nil || lt.tr.Turn != turn {
		ts.mu.Unlock()
		return
	}
	lt.ended = true
	body, err := json.Marshal(lt.tr)
	empty := len(lt.tr.Calls) == 0
	ts.mu.Unlock()
	if err == nil && !empty {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = ts.st.SaveTranscript(wctx, &store.Transcript{TaskID: taskID, Turn: turn, Body: string(body), At: time.Now().UTC()})
		cancel()
	}
	if err != nil {
		ts.log.Error("keep the turn's transcript", "task", lt.ref, "turn", turn, "err", err)
	}
	ts.mu.Lock()
	if ts.turns[taskID] == lt {
		delete(ts.turns, taskID)
	}
	ts.mu.Unlock()
}

// live is a copy of the transcript of the task's turn still in memory (the
// running one, or one ended and not yet kept), nil when there is none.
func (ts *transcripts) live(taskID string) *api.TurnTranscript {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	lt := ts.turns[taskID]
	if lt == nil {
		return nil
	}
	c := lt.tr
	c.Calls = make([]api.TranscriptCall, len(lt.tr.Calls))
	for i, call := range lt.tr.Calls {
		call.Tools = append([]api.ToolCall(nil), call.Tools...)
		call.Results = append([]api.ToolResult(nil), call.Results...)
		c.Calls[i] = call
	}
	c.Files = append([]string(nil), lt.tr.Files...)
	c.Written = append([]string(nil), lt.tr.Written...)
	return &c
}

// overlay puts the in-memory transcripts into a task's detail: the running
// turn's so far, or one ended whose write has not landed.
func (ts *transcripts) overlay(d *api.TaskDetail) {
	tr := ts.live(d.Task.ID)
	if tr == nil {
		return
	}
	for i := range d.Turns {
		if d.Turns[i].Number == tr.Turn {
			d.Turns[i].Transcript = tr
		}
	}
}

// For is the proxy's Options.Transcript: a call's transcript, or nil when
// its task has no running turn whose transcript has room.
func (ts *transcripts) For(taskID, taskRef string) proxy.Transcript {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	lt := ts.turns[taskID]
	if lt == nil || lt.ended || lt.tr.Truncated {
		return nil
	}
	if lt.ref == "" {
		lt.ref = taskRef
	}
	lt.calls++
	return &callTranscript{ts: ts, lt: lt, call: lt.calls, last: time.Now()}
}

// callTranscript is one model call's: text is gathered and sent as a part
// every flushEvery or flushBytes, at a tool call and at the end.
type callTranscript struct {
	ts      *transcripts
	lt      *liveTurn
	call    int
	pending strings.Builder
	last    time.Time
	tokens  int64
}

const (
	flushEvery = 150 * time.Millisecond
	flushBytes = 1 << 10
)

var _ proxy.Transcript = (*callTranscript)(nil)

func (c *callTranscript) OnText(s string) {
	c.pending.WriteString(s)
	if c.pending.Len() >= flushBytes || time.Since(c.last) >= flushEvery {
		c.flush()
	}
}

func (c *callTranscript) OnToolCall(name, input string) {
	c.flush()
	tc := api.ToolCall{Name: cut(name, 200), Input: cut(input, api.MaxToolInput), File: fileOf(name, input)}
	c.emit(api.TranscriptPart{Tool: &tc})
}

func (c *callTranscript) OnUsage(u api.CallUsage) { c.tokens = u.Tokens() }

func (c *callTranscript) End() {
	c.flush()
	c.ts.mu.Lock()
	c.lt.tokens += c.tokens
	tokens := c.lt.tokens
	c.ts.mu.Unlock()
	c.emit(api.TranscriptPart{Done: true, Tokens: tokens})
}

// flush sends the gathered text, in parts of at most MaxTranscriptEvent.
func (c *callTranscript) flush() {
	c.last = time.Now()
	s := c.pending.String()
	c.pending.Reset()
	for s != "" {
		n := min(len(s), api.MaxTranscriptEvent)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		c.emit(api.TranscriptPart{Text: s[:n]})
		s = s[n:]
	}
}

// emit numbers a part of the call and adds it to the turn (ts.add).
func (c *callTranscript) emit(p api.TranscriptPart) {
	c.ts.add(c.lt, c.call, c.tokens, p)
}

// add numbers a part of call, keeps it in the turn's transcript (cut where
// the turn's bound is reached: a last part says so), and sends it to the
// task's watchers. running is the tokens of the call still running.
func (ts *transcripts) add(lt *liveTurn, call int, running int64, p api.TranscriptPart) {
	ts.mu.Lock()
	if lt.ended || lt.tr.Truncated {
		ts.mu.Unlock()
		return
	}
	if p.Size() > api.MaxTurnTranscript-lt.tr.Bytes {
		p = api.TranscriptPart{Truncated: true}
	}
	p.Turn, p.Call, p.Seq = lt.tr.Turn, call, lt.tr.Seq+1
	if p.Tokens == 0 {
		p.Tokens = lt.tokens + running
	}
	lt.tr.Apply(p)
	ts.mu.Unlock()
	if ts.wants(lt.taskID) {
		ts.publish(api.Event{Time: time.Now().UTC(), Kind: api.EventTranscript, TaskID: lt.taskID, TaskRef: lt.ref, Turn: p.Turn, Transcript: &p})
	}
}

// Client is the launcher's Launcher.Client: what the agent client reports
// of the task's turn on its own stream, masked by mask (the proxy's Mask:
// the real credentials and the task's placeholders — agent-written data may
// echo a placeholder) before it is cut, and joined to the turn's
// transcript as parts of the turn's latest model call.
func (ts *transcripts) Client(taskID, ref string, turn int, mask func(taskID, s string) string) agent.ClientEvents {
	return &clientTranscript{ts: ts, taskID: taskID, ref: ref, turn: turn, mask: mask}
}

// clientTranscript is one turn's client stream.
type clientTranscript struct {
	ts          *transcripts
	taskID, ref string
	turn        int
	mask        func(taskID, s string) string
}

var _ agent.ClientEvents = (*clientTranscript)(nil)

func (c *clientTranscript) OnToolResult(tool, content string, isError bool) {
	r := api.ToolResult{Tool: cut(c.mask(c.taskID, tool), 200), Content: cut(c.mask(c.taskID, content), api.MaxToolResult), IsError: isError}
	c.emit(api.TranscriptPart{Result: &r})
}

func (c *clientTranscript) OnFileWritten(path string) {
	c.emit(api.TranscriptPart{Wrote: cut(c.mask(c.taskID, path), 512)})
}

// emit adds a part to the turn when it is the task's running turn (the
// one the launcher ran) and its transcript has room.
func (c *clientTranscript) emit(p api.TranscriptPart) {
	ts := c.ts
	ts.mu.Lock()
	lt := ts.turns[c.taskID]
	if lt == nil || lt.tr.Turn != c.turn || lt.ended || lt.tr.Truncated {
		ts.mu.Unlock()
		return
	}
	if lt.ref == "" {
		lt.ref = c.ref
	}
	call := max(lt.calls, 1)
	p.Tokens = lt.tr.Tokens // the turn's so far: the client reports none
	ts.mu.Unlock()
	ts.add(lt, call, 0, p)
}

// cut bounds s to n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// fileOf is the file a tool call writes, when its name says it writes one
// (Write, Edit, MultiEdit, NotebookEdit, write_file, replace, …) and its
// input names the path.
func fileOf(name, input string) string {
	n := strings.ToLower(name)
	if !strings.Contains(n, "write") && !strings.Contains(n, "edit") && !strings.Contains(n, "replace") && !strings.Contains(n, "patch") {
		return ""
	}
	var in map[string]any
	if json.Unmarshal([]byte(input), &in) != nil {
		return ""
	}
	for _, k := range []string{"file_path", "path", "notebook_path", "absolute_path"} {
		if v, ok := in[k].(string); ok && v != "" {
			return cut(v, 512)
		}
	}
	return ""
}
