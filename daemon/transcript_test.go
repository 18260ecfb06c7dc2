package daemon

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"lazy/api"
)

// TestClientTranscript: what the agent client reports on its own stream
// joins the running turn's transcript as parts of its latest model call —
// the tool result masked before it is cut (a placeholder across the cut is
// masked whole, never half shown), the file in Written — and is sent to
// the watchers; a report for another turn, or past the turn's bound, adds
// nothing.
func TestClientTranscript(t *testing.T) {
	var mu sync.Mutex
	var sent []api.TranscriptPart
	ts := newTranscripts(nil, slog.New(slog.DiscardHandler), func(e api.Event) {
		mu.Lock()
		sent = append(sent, *e.Transcript)
		mu.Unlock()
	}, func(string) bool { return true })
	ts.turns["t1"] = &liveTurn{taskID: "t1", ref: "fix-1", tr: api.TurnTranscript{Turn: 2, Calls: []api.TranscriptCall{}}}
	const ph = "sk-ant-api03-svc-PLACEHOLDER-0123456789"
	mask := func(taskID, s string) string {
		if taskID != "t1" {
			t.Errorf("masked for task %q", taskID)
		}
		return strings.ReplaceAll(s, ph, strings.Repeat("*", len(ph)))
	}
	call := ts.For("t1", "fix-1") // the model's first call, read at the proxy
	call.OnToolCall("Write", `{"file_path":"/w/a.go"}`)
	call.End()
	c := ts.Client("t1", "fix-1", 2, mask)
	content := strings.Repeat("x", api.MaxToolResult-10) + ph + " tail"
	c.OnToolResult("Write", content, false)
	c.OnFileWritten("a.go")
	c.OnFileWritten("a.go")
	ts.Client("t1", "fix-1", 1, mask).OnFileWritten("old.go") // not the running turn

	tr := ts.live("t1")
	if !slices.Equal(tr.Written, []string{"a.go"}) || !slices.Equal(tr.Files, []string{"/w/a.go"}) {
		t.Errorf("written %q, files %q", tr.Written, tr.Files)
	}
	if len(tr.Calls) != 1 || len(tr.Calls[0].Results) != 1 {
		t.Fatalf("calls: %+v", tr.Calls)
	}
	r := tr.Calls[0].Results[0]
	if len(r.Content) != api.MaxToolResult || strings.Contains(r.Content, "sk-ant") || !strings.HasSuffix(r.Content, "**********") || r.Tool != "Write" {
		t.Errorf("result: %d bytes %q…", len(r.Content), r.Content[len(r.Content)-40:])
	}
	mu.Lock()
	n := len(sent)
	last := sent[n-1]
	mu.Unlock()
	// tool call, done, result, wrote (the second a.go is a part, not a new file)
	if n != 5 || last.Wrote != "a.go" || last.Call != 1 || last.Turn != 2 || last.Seq != 5 {
		t.Errorf("sent %d parts, last %+v", n, last)
	}

	// past the turn's bound: one part says so, then nothing
	big := strings.Repeat("y", api.MaxToolResult)
	for i := 0; i < api.MaxTurnTranscript/api.MaxToolResult+2; i++ {
		c.OnToolResult("Read", big, false)
	}
	c.OnFileWritten("late.go")
	tr = ts.live("t1")
	if !tr.Truncated || tr.Bytes > api.MaxTurnTranscript || slices.Contains(tr.Written, "late.go") {
		t.Errorf("past the bound: truncated %v, %d bytes, written %q", tr.Truncated, tr.Bytes, tr.Written)
	}
}
