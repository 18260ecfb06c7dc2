package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// gotEvents records what a client stream reported.
type gotEvents struct {
	mu      sync.Mutex
	results []string // "tool|content|error?"
	files   []string
}

func (g *gotEvents) OnToolResult(tool, content string, isError bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := ""
	if isError {
		e = "error"
	}
	g.results = append(g.results, tool+"|"+content+"|"+e)
}

func (g *gotEvents) OnFileWritten(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files = append(g.files, path)
}

// TestClaudeStreamRealOutput reads what the real claude 2.1.328 printed
// with --output-format stream-json --verbose for a turn whose model (the
// stub's @stub-write) called Write: fed in pieces of every size, the
// stream reports the Write's result and the file relative to the worktree,
// and keeps only the result for ParseResult.
func TestClaudeStreamRealOutput(t *testing.T) {
	raw, err := os.ReadFile("testdata/claude-stream-write.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 7, 100, len(raw)} {
		var ev gotEvents
		s := ClaudeCode{StreamJSON: true}.Stream("/tmp/enr/wt/", &ev)
		for b := raw; len(b) > 0; {
			n := min(size, len(b))
			if m, err := s.Write(b[:n]); m != n || err != nil {
				t.Fatalf("write: %d %v", m, err)
			}
			b = b[n:]
		}
		if len(ev.results) != 1 || !strings.HasPrefix(ev.results[0], "Write|File created successfully at: /tmp/enr/wt/notes/hello.txt") || !strings.HasSuffix(ev.results[0], "|") {
			t.Errorf("size %d: tool results %q", size, ev.results)
		}
		if !slices.Equal(ev.files, []string{"notes/hello.txt"}) {
			t.Errorf("size %d: files written %q, want [notes/hello.txt]", size, ev.files)
		}
		out := s.Output()
		if strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), `"type":"result"`) {
			t.Errorf("size %d: output is not the result line alone:\n%s", size, out)
		}
		res, err := ClaudeCode{}.ParseResult(out)
		if err != nil || res.SessionID != "b384c3aa-b129-4f8b-af7f-25ea0e182ec1" || res.Text != "stub answer to: " || res.IsError {
			t.Errorf("size %d: result %+v %v", size, res, err)
		}
	}
	// the whole stream parses as the result too (a caller without Stream)
	if res, err := (ClaudeCode{}).ParseResult(raw); err != nil || res.Text != "stub answer to: " {
		t.Errorf("whole stream: %+v %v", res, err)
	}
}

// TestClaudeStreamEdges: a refused write is a result but no file; a result
// of no tool seen, an over-long line and a line cut by the end are
// handled; a notice before the events is kept beside the result; a
// stream that died before its result gives no result (never one of its
// other events).
func TestClaudeStreamEdges(t *testing.T) {
	var ev gotEvents
	s := ClaudeCode{StreamJSON: true}.Stream("/w", &ev)
	lines := []string{
		`Notice: resuming through a non-Anthropic base URL`,
		`{"type":"system","subtype":"init","session_id":"S"}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Write","input":{"file_path":"/w/x.go"}},{"type":"tool_use","id":"b","name":"Edit","input":{"file_path":"/elsewhere/y.go"}},{"type":"tool_use","id":"c","name":"Bash","input":{"command":"ls"}}]},"session_id":"S"}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"denied in plan mode","is_error":true}]},"session_id":"S"}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"edited"},{"type":"image"}]}]},"session_id":"S"}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"c","content":"` + strings.Repeat("x", MaxClientResult+10) + `"}]},"session_id":"S"}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"zz","content":"a result of no tool seen"}]},"session_id":"S"}`,
		`{"type":"user","message":{"content":"plain text"},"session_id":"S"}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("y", maxStreamLine) + `"}]},"session_id":"S"}`,
	}
	if _, err := s.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	want := []string{"Write|denied in plan mode|error", "Edit|edited\n[image]|", "Bash|" + strings.Repeat("x", MaxClientResult) + "|"}
	if !slices.Equal(ev.results, want) {
		t.Errorf("results:\n got %.200q\nwant %.200q", ev.results, want)
	}
	if !slices.Equal(ev.files, []string{"/elsewhere/y.go"}) {
		t.Errorf("files: %q, want only the edit that succeeded, outside the worktree as is", ev.files)
	}
	if _, err := (ClaudeCode{}).ParseResult(s.Output()); err == nil {
		t.Errorf("a stream with no result parsed as one: %q", s.Output())
	}
	// the result comes last, with no newline
	s.Write([]byte(`{"type":"result","is_error":false,"result":"done","session_id":"S"}`))
	out := string(s.Output())
	if !strings.HasPrefix(out, "Notice: resuming") || strings.Count(out, "\n") != 2 {
		t.Errorf("output: %q", out)
	}
	if res, err := (ClaudeCode{}).ParseResult([]byte(out)); err != nil || res.Text != "done" {
		t.Errorf("result %+v %v", res, err)
	}
}

// TestLauncherStreamsClientEvents: a work turn of the scripted agent
// (speaking stream-json as claude does) reports its writes to
// Launcher.Client while it runs, relative to the worktree; the turn's
// output is the result alone; an ask turn's refused write is an error
// result and no file.
func TestLauncherStreamsClientEvents(t *testing.T) {
	e := newTurnEnv(t)
	var ev gotEvents
	var got []int
	l := &Launcher{Driver: Script{ClaudeCode{StreamJSON: true}}, Runner: Process{}, Command: self(t), BaseURL: e.url, DaemonEnv: os.Environ(), AgentsDir: t.TempDir(),
		Placeholders: func(context.Context, string, string, string) (map[string]string, error) {
			return map[string]string{EnvAPIKey: "sk-ant-api03-svc-placeholder"}, nil
		},
		Client: func(taskID, ref string, turn int) ClientEvents {
			got = append(got, turn)
			return &ev
		}}
	res, out, err := l.RunTurn(context.Background(), TurnRequest{TaskID: "t1", Ref: "fix-1", Worktree: e.worktree, Number: 3,
		Prompt: "write\n@write pkg/a.txt one\n@append notes.md two"})
	if err != nil {
		t.Fatalf("turn: %v\n%s", err, out.Combined())
	}
	if !slices.Equal(got, []int{3}) {
		t.Errorf("Client asked for turns %v, want [3]", got)
	}
	if !slices.Equal(ev.files, []string{"pkg/a.txt", "notes.md"}) {
		t.Errorf("files written: %q", ev.files)
	}
	if len(ev.results) != 2 || !strings.HasPrefix(ev.results[0], "Write|File written at: pkg/a.txt|") {
		t.Errorf("results: %q", ev.results)
	}
	if strings.Count(string(out.Stdout), "\n") != 1 || res.SessionID == "" {
		t.Errorf("turn output is not the result alone: %q (%+v)", out.Stdout, res)
	}
	if b, err := os.ReadFile(filepath.Join(e.worktree, "pkg", "a.txt")); err != nil || string(b) != "one" {
		t.Errorf("pkg/a.txt: %q %v", b, err)
	}
	ev = gotEvents{}
	if _, out, err := l.RunTurn(context.Background(), TurnRequest{TaskID: "t1", Ref: "fix-1", Worktree: e.worktree, Number: 4, Ask: true,
		Session: res.SessionID, Prompt: "why?\n@write other.txt nope"}); err != nil {
		t.Fatalf("ask: %v\n%s", err, out.Combined())
	}
	if len(ev.files) != 0 || len(ev.results) != 1 || !strings.HasSuffix(ev.results[0], "|error") {
		t.Errorf("ask turn: files %q, results %q; want no file and one error result", ev.files, ev.results)
	}
}
