package agent

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// feed writes raw to s in pieces of size bytes.
// checkStreamed feeds raw to drv's stream in chunks of 1, 7 and all bytes,
// and checks each time the tool results and files reported, that Output
// parses as whole, and that it drops the lines holding any of dropped.
func checkStreamed(t *testing.T, drv interface {
	Streamer
	ParseResult([]byte) (Result, error)
}, worktree string, raw []byte, wantResults, wantFiles []string, whole Result, dropped ...string) {
	t.Helper()
	for _, size := range []int{1, 7, len(raw)} {
		var ev gotEvents
		s := drv.Stream(worktree, &ev)
		feed(t, s, raw, size)
		if !slices.Equal(ev.results, wantResults) {
			t.Errorf("size %d: results\n got %q\nwant %q", size, ev.results, wantResults)
		}
		if !slices.Equal(ev.files, wantFiles) {
			t.Errorf("size %d: files %q, want %q", size, ev.files, wantFiles)
		}
		out := s.Output()
		if res, err := drv.ParseResult(out); err != nil || res != whole {
			t.Errorf("size %d: Output parses as %+v %v, want %+v", size, res, err, whole)
		}
		for _, d := range dropped {
			if strings.Contains(string(out), d) {
				t.Errorf("size %d: Output keeps lines ParseResult does not read:\n%s", size, out)
			}
		}
	}
}

func feed(t *testing.T, s Stream, raw []byte, size int) {
	t.Helper()
	for b := raw; len(b) > 0; {
		n := min(size, len(b))
		if m, err := s.Write(b[:n]); m != n || err != nil {
			t.Fatalf("write: %d %v", m, err)
		}
		b = b[n:]
	}
}

// TestCodexStream reads a turn of `codex exec --json` in the shape codex
// 0.169 prints (exec_events.rs: command_execution, file_change,
// agent_message items; the stub model makes no tool call codex would run,
// so the lines are written from that shape): fed in pieces of 1, 7 and all
// bytes, each completed command is a "shell" result (an error when its
// exit code is not 0), each applied file change a file written relative
// to the worktree (outside it as given; a failed patch none), and Output
// parses as the whole stream does.
func TestCodexStream(t *testing.T) {
	raw, err := os.ReadFile("testdata/codex-stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Codex{}.ParseResult(raw)
	if err != nil || whole.SessionID != "0199a213-81c0-7800-8aa1-bbab2a035a53" || whole.Text != "Wrote notes/hello.txt." || whole.IsError {
		t.Fatalf("the whole stream: %+v %v", whole, err)
	}
	wantResults := []string{
		"shell|$ bash -lc ls\nREADME.md\nnotes\n|",
		"shell|$ bash -lc 'cat missing.txt'\ncat: missing.txt: No such file or directory\n|error",
	}
	wantFiles := []string{"notes/hello.txt", "README.md", "/etc/outside.conf"}
	checkStreamed(t, Codex{}, "/tmp/cx/wt/", raw, wantResults, wantFiles, whole, "command_execution", "Adding the note now.")
	// no ClientEvents: the stream still gives the result
	s := Codex{}.Stream("/tmp/cx/wt", nil)
	feed(t, s, raw, 7)
	if res, err := (Codex{}).ParseResult(s.Output()); err != nil || res != whole {
		t.Errorf("with no events: %+v %v", res, err)
	}
	// nothing written: the runner's own stdout stands
	if out := (Codex{}).Stream("/w", nil).Output(); out != nil {
		t.Errorf("an unwritten stream's output: %q", out)
	}
}

// TestCodexStreamEdges: a failed turn keeps its errors in order (the
// message ParseResult reports), a notice is kept, an over-long command
// output is cut, a relative path is kept as given, a last line with no
// newline is read, and an agent printing endless events or notices is
// bounded.
func TestCodexStreamEdges(t *testing.T) {
	var ev gotEvents
	s := Codex{}.Stream("/w", &ev)
	lines := []string{
		`Reading prompt from stdin...`,
		`{"type":"thread.started","thread_id":"T1"}`,
		`{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"first"}}`,
		`{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"yes","aggregated_output":"` + strings.Repeat("y", MaxClientResult) + `","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"src/a.go","kind":"update"},{"path":"../up.go","kind":"add"}],"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"i3","type":"command_execution","command":"rm -rf /","aggregated_output":"","status":"declined"}}`,
		`{"type":"error","message":"Reconnecting... 1/5"}`,
		`{"type":"item.completed","item":{"id":"i4","type":"agent_message","text":"` + strings.Repeat("z", maxStreamLine) + `"}}`,
	}
	feed(t, s, []byte(strings.Join(lines, "\n")+"\n"+`{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan."}}`), 4096)
	if len(ev.results) != 2 || len(ev.results[0]) != len("shell|")+MaxClientResult+1 || !strings.HasPrefix(ev.results[0], "shell|$ yes\nyyy") || ev.results[1] != "shell|$ rm -rf /\n|error" {
		t.Errorf("results: %.200q", ev.results)
	}
	if !slices.Equal(ev.files, []string{"src/a.go", "../up.go"}) {
		t.Errorf("files: %q", ev.files)
	}
	out := s.Output()
	res, err := Codex{}.ParseResult(out)
	if err != nil || res.SessionID != "T1" || !res.IsError || res.Text != "Quota exceeded. Check your plan." {
		t.Errorf("result %+v %v", res, err)
	}
	if !strings.HasPrefix(string(out), "Reading prompt from stdin...\n") || !strings.Contains(string(out), `"text":"first"`) || !strings.Contains(string(out), "Reconnecting") {
		t.Errorf("output:\n%s", out)
	}

	// an agent printing events of its own: what is kept stays bounded
	s = Codex{}.Stream("/w", nil)
	for range 20000 {
		s.Write([]byte(`{"type":"error","message":"again"}` + "\n" + `{"type":"turn.completed"}` + "\nnot an event\n"))
	}
	s.Write([]byte(`{"type":"item.completed","item":{"type":"agent_message","text":"last"}}` + "\n"))
	if out := s.Output(); len(out) > 2*maxNotices+200 {
		t.Errorf("kept %d bytes of a flood", len(out))
	} else if res, err := (Codex{}).ParseResult(out); err != nil || res.Text != "last" {
		t.Errorf("after a flood: %+v %v", res, err)
	}
}
