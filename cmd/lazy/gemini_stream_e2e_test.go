package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lazy/api"
)

// TestRealGeminiStreamTranscript: the real gemini CLI runs with
// --output-format stream-json; when the model (the stub's @stub-write on
// the Gemini route) calls write_file, the client writes the file and
// reports it on its stream, and the turn's transcript gains the
// write_file's result and the file, relative to the worktree — live in
// the task's event stream before the turn ends, and kept with the turn.
// The session resumes across turns; no real key and no placeholder is in
// the stream.
func TestRealGeminiStreamTranscript(t *testing.T) {
	gemini := geminiPath(t)
	p := newProject(t, "") // the default runner: bwrap
	real := p.useGemini(t, gemini, true)
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "gw", "-m", "write a note\n@stub-write notes/hello.txt hello\\nworld")
	ti := p.waitStatus("gw", "blocked")
	b, err := os.ReadFile(filepath.Join(ti.Worktree, "notes", "hello.txt"))
	if err != nil || string(b) != "hello\nworld" {
		t.Fatalf("the real client did not write notes/hello.txt: %q %v (%s)", b, err, ti.FailReason)
	}
	s := p.showAll("gw")
	if len(s.TurnRecords) != 1 || s.TurnRecords[0].Transcript == nil {
		t.Fatalf("turn 1 kept no transcript: %+v", s.TurnRecords)
	}
	tr := s.TurnRecords[0].Transcript
	t.Logf("turn 1 transcript: written %q, results %+v", tr.Written, results(tr))
	if !slices.Equal(tr.Written, []string{"notes/hello.txt"}) {
		t.Errorf("turn 1 written: %q, want [notes/hello.txt]", tr.Written)
	}
	if r := results(tr); len(r) != 1 || r[0].Tool != "write_file" || r[0].IsError {
		t.Errorf("turn 1 tool results: %+v", r)
	}
	session := s.TurnRecords[0].SessionID
	if out := s.TurnRecords[0].Output; strings.Contains(out, `"type":"tool_use"`) || !strings.Contains(out, `"type":"result"`) {
		t.Errorf("turn 1's output is not what ParseResult reads:\n%s", out)
	}

	ev := p.streamEvents("gw")
	p.lazy(0, "comment", "gw", "-m", "one more\n@stub-write notes/two.txt second")
	result := ev.waitFor(t, "transcript with the write_file's result", func(e api.Event) bool {
		return e.Kind == api.EventTranscript && e.Transcript != nil && e.Transcript.Result != nil && e.Transcript.Result.Tool == "write_file"
	})
	wrote := ev.waitFor(t, "transcript with the file written", func(e api.Event) bool {
		return e.Kind == api.EventTranscript && e.Transcript != nil && e.Transcript.Wrote == "notes/two.txt"
	})
	end := ev.waitFor(t, "turn_end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 2 })
	if !(result < wrote && wrote < end) {
		t.Errorf("order: result %d, wrote %d, turn_end %d:\n%s", result, wrote, end, ev.text())
	}
	p.waitStatus("gw", "blocked")
	s = p.showAll("gw")
	if got := s.TurnRecords[len(s.TurnRecords)-1].SessionID; got != session || session == "" {
		t.Errorf("turn 2 did not resume the session: %q, was %q", got, session)
	}
	if tr := s.TurnRecords[len(s.TurnRecords)-1].Transcript; tr == nil || !slices.Equal(tr.Written, []string{"notes/two.txt"}) {
		t.Errorf("turn 2 kept transcript: %+v", tr)
	}
	stream := ev.text()
	for _, leak := range []string{real, "svc-"} {
		if strings.Contains(stream, leak) {
			t.Errorf("%q in the event stream", leak)
		}
	}
	p.lazy(0, "daemon", "stop")
}
