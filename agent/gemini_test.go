package agent

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestGeminiArgv(t *testing.T) {
	for _, tc := range []struct {
		mode, session string
		ask           bool
		want          string
	}{
		{"", "", false, `-p  --output-format stream-json --approval-mode auto_edit`},
		{"acceptEdits", "s1", false, `-p  --output-format stream-json --approval-mode auto_edit --resume s1`},
		{"bypassPermissions", "", false, `-p  --output-format stream-json --approval-mode yolo`},
		{"bypassPermissions", "s1", true, `-p  --output-format stream-json --approval-mode plan --resume s1`},
		{"default", "", true, `-p  --output-format stream-json --approval-mode plan`},
	} {
		d := Gemini{PermissionMode: tc.mode}
		argv := d.WorkArgv(tc.session)
		if tc.ask {
			argv = d.AskArgv(tc.session)
		}
		if got := strings.Join(argv, " "); got != tc.want {
			t.Errorf("mode %q ask %v: got %q, want %q", tc.mode, tc.ask, got, tc.want)
		}
	}
}

func TestGeminiParseResult(t *testing.T) {
	for _, tc := range []struct {
		out, text, session string
		isErr, fails       bool
	}{
		{"{\n  \"session_id\": \"abc\",\n  \"response\": \"hi there\",\n  \"stats\": {\"models\": {}}\n}\n", "hi there", "abc", false, false},
		{"a notice\n{ not json\n{\n  \"session_id\": \"s\",\n  \"response\": \"{x}\"\n}", "{x}", "s", false, false},
		{"{\n  \"session_id\": \"s\",\n  \"error\": {\"type\": \"Error\", \"message\": \"quota\", \"code\": 429}\n}\n", "quota", "s", true, false},
		{"no json at all", "", "", false, true},
		{"{\"other\": 1}", "", "", false, true},
	} {
		r, err := Gemini{}.ParseResult([]byte(tc.out))
		if (err != nil) != tc.fails || r.Text != tc.text || r.SessionID != tc.session || r.IsError != tc.isErr {
			t.Errorf("ParseResult(%q) = %+v, %v", tc.out, r, err)
		}
	}
}

func TestGeminiClientConfig(t *testing.T) {
	env := strings.Join(Gemini{}.ClientEnv("http://127.0.0.1:9"), " ")
	if !strings.Contains(env, "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9") || !strings.Contains(env, "GEMINI_CLI_TRUST_WORKSPACE=true") {
		t.Errorf("env %s", env)
	}
	home := t.TempDir()
	if err := WriteDecoys(home, Gemini{}.HomeFiles()); err != nil {
		t.Fatal(err)
	}
	fs := Gemini{}.HomeFiles()
	if len(fs) != 1 || fs[0].Path != ".gemini/settings.json" || !strings.Contains(string(fs[0].Body), `"selectedType": "gemini-api-key"`) {
		t.Errorf("home files %+v", fs)
	}
	if d, err := NewDriver("gemini", "acceptEdits", false); err != nil || d.Name() != "gemini" {
		t.Errorf("NewDriver gemini: %v %v", d, err)
	}
}

// TestGeminiLostSession: gemini's refusal of a session it no longer has
// makes the launcher start a new conversation, as claude's does.
func TestGeminiLostSession(t *testing.T) {
	out := Outcome{Stderr: []byte("Error resuming session: Invalid session identifier \"1111\".\n  Searched for sessions in /h/.gemini/tmp/w/chats.\n"), ExitCode: 42}
	if !lostSession(out) {
		t.Error("gemini's lost session is not recognised")
	}
	if lostSession(Outcome{Stderr: []byte("some other failure")}) {
		t.Error("any failure taken for a lost session")
	}
}

// TestGeminiStream reads a turn the real gemini 0.61 printed with
// --output-format stream-json (against an upstream that called write_file
// and a read_file with bad parameters; the worktree path rewritten to
// /work/wt): fed in pieces of 1, 7 and all bytes, each tool_result is
// reported under its tool_use's name (an error when its status is not
// success), the write_file that succeeded names its file relative to the
// worktree, and Output parses as the whole stream does.
func TestGeminiStream(t *testing.T) {
	raw, err := os.ReadFile("testdata/gemini-stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Gemini{}.ParseResult(raw)
	if err != nil || whole.SessionID != "75edbef3-cbfc-4ced-be73-51571c4c5d98" || whole.Text != "I will write files. All done: wrote hello.txt." || whole.IsError {
		t.Fatalf("the whole stream: %+v %v", whole, err)
	}
	wantResults := []string{
		"write_file||",
		"read_file|params must have required property 'file_path'|error",
	}
	wantFiles := []string{"hello.txt"}
	checkStreamed(t, Gemini{}, "/work/wt/", raw, wantResults, wantFiles, whole, "tool_use", "write hello")
	if out := (Gemini{}).Stream("/w", nil).Output(); out != nil {
		t.Errorf("an empty stream's Output is %q, want nil", out)
	}
}

// TestGeminiStreamError: a result whose status is not success is an error
// result, its message the text; a failed write names no file; a stream
// with neither init nor result is no result.
func TestGeminiStreamError(t *testing.T) {
	raw := "a notice\n" +
		`{"type":"init","session_id":"s1","model":"auto"}` + "\n" +
		`{"type":"message","role":"assistant","content":"trying","delta":true}` + "\n" +
		`{"type":"tool_use","tool_name":"replace","tool_id":"r1","parameters":{"file_path":"/w/a.go","old_string":"x","new_string":"y"}}` + "\n" +
		`{"type":"tool_result","tool_id":"r1","status":"error","error":{"type":"edit_no_occurrence_found","message":"no match"}}` + "\n" +
		`{"type":"tool_result","tool_id":"nobody","status":"success","output":"x"}` + "\n" +
		`{"type":"result","status":"error","error":{"type":"FatalError","message":"quota exceeded"}}`
	var ev gotEvents
	s := Gemini{}.Stream("/w", &ev)
	feed(t, s, []byte(raw), 3)
	if !slices.Equal(ev.results, []string{"replace|no match|error"}) || len(ev.files) != 0 {
		t.Errorf("results %q files %q", ev.results, ev.files)
	}
	res, err := Gemini{}.ParseResult(s.Output())
	if err != nil || res.SessionID != "s1" || !res.IsError || res.Text != "quota exceeded" {
		t.Errorf("ParseResult = %+v %v", res, err)
	}
	if _, err := (Gemini{}).ParseResult([]byte(`{"type":"message","role":"assistant","content":"x"}`)); err == nil {
		t.Error("a stream with no init or result parsed as a result")
	}
}
