package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lazy/api"
)

// TestRealClientStreamEnrichesTranscript (issue 29): the real claude runs
// with --output-format stream-json (agent.client_stream); when the model (the stub's
// @stub-write) calls Write, the client writes the file and reports it on
// its own stream, and the turn's transcript gains the Write's result and
// the file, relative to the worktree — live in the task's event stream
// before the turn ends, and kept with the turn. The session resumes
// across turns as before; no real key and no placeholder is in the stream
// or the kept transcript.
func TestRealClientStreamEnrichesTranscript(t *testing.T) {
	claude := claudePath(t)
	p := newProject(t, "") // the sandbox the runner "auto" makes here
	p.useClaude(t, claude, "api_key")
	p.env = append(p.env, "LAZY_AGENT__CLIENT_STREAM=true") // claude's own stream, read as the turn runs
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "wr", "-m", "write a note\n@stub-write notes/hello.txt hello\\nworld")
	ti := p.waitStatus("wr", "blocked")
	b, err := os.ReadFile(filepath.Join(ti.Worktree, "notes", "hello.txt"))
	if err != nil || string(b) != "hello\nworld" {
		t.Fatalf("the real client did not write notes/hello.txt: %q %v (%s)", b, err, ti.FailReason)
	}
	s := p.showAll("wr")
	if len(s.TurnRecords) != 1 || s.TurnRecords[0].Transcript == nil {
		t.Fatalf("turn 1 kept no transcript: %+v", s.TurnRecords)
	}
	tr := s.TurnRecords[0].Transcript
	t.Logf("turn 1 transcript: files %q, written %q, calls %d", tr.Files, tr.Written, len(tr.Calls))
	if !slices.Equal(tr.Written, []string{"notes/hello.txt"}) {
		t.Errorf("turn 1 written: %q, want [notes/hello.txt]", tr.Written)
	}
	if r := results(tr); len(r) != 1 || r[0].Tool != "Write" || r[0].IsError || !strings.Contains(r[0].Content, "notes/hello.txt") {
		t.Errorf("turn 1 tool results: %+v", r)
	}
	session := s.TurnRecords[0].SessionID
	// the turn's output is what --output-format json printed: the result
	if out := s.TurnRecords[0].Output; strings.Contains(out, `"type":"assistant"`) || !strings.Contains(out, `"type":"result"`) {
		t.Errorf("turn 1's output is not the result alone:\n%s", out)
	}

	// the next turn, watched: the file written is in the stream before the
	// turn ends, and the turn resumed the client's session
	ev := p.streamEvents("wr")
	p.lazy(0, "comment", "wr", "-m", "one more\n@stub-write notes/two.txt second")
	wrote := ev.waitFor(t, "transcript with the file written", func(e api.Event) bool {
		return e.Kind == api.EventTranscript && e.Transcript != nil && e.Transcript.Wrote == "notes/two.txt"
	})
	result := ev.waitFor(t, "transcript with the Write's result", func(e api.Event) bool {
		return e.Kind == api.EventTranscript && e.Transcript != nil && e.Transcript.Result != nil && e.Transcript.Result.Tool == "Write"
	})
	end := ev.waitFor(t, "turn_end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 2 })
	if !(result < wrote && wrote < end) {
		t.Errorf("order: result %d, wrote %d, turn_end %d:\n%s", result, wrote, end, ev.text())
	}
	p.waitStatus("wr", "blocked")
	s = p.showAll("wr")
	if got := s.TurnRecords[len(s.TurnRecords)-1].SessionID; got != session || session == "" {
		t.Errorf("turn 2 did not resume the session: %q, was %q", got, session)
	}
	if tr := s.TurnRecords[len(s.TurnRecords)-1].Transcript; tr == nil || !slices.Equal(tr.Written, []string{"notes/two.txt"}) {
		t.Errorf("turn 2 kept transcript: %+v", tr)
	}
	stream := ev.text()
	for _, leak := range []string{p.real, "svc-"} {
		if strings.Contains(stream, leak) {
			t.Errorf("%q in the event stream", leak)
		}
	}
	db, err := os.ReadFile(p.paths.DB)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(p.paths.DB + "-wal")
	if db = append(db, wal...); strings.Contains(string(db), p.real) {
		t.Error("the store holds the real key")
	}
}

// results are a transcript's tool results, in order.
func results(tr *api.TurnTranscript) []api.ToolResult {
	var out []api.ToolResult
	for _, c := range tr.Calls {
		out = append(out, c.Results...)
	}
	return out
}
