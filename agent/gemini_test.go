package agent

import (
	"strings"
	"testing"
)

func TestGeminiArgv(t *testing.T) {
	for _, tc := range []struct {
		mode, session string
		ask           bool
		want          string
	}{
		{"", "", false, `-p  --output-format json --approval-mode auto_edit`},
		{"acceptEdits", "s1", false, `-p  --output-format json --approval-mode auto_edit --resume s1`},
		{"bypassPermissions", "", false, `-p  --output-format json --approval-mode yolo`},
		{"bypassPermissions", "s1", true, `-p  --output-format json --approval-mode plan --resume s1`},
		{"default", "", true, `-p  --output-format json --approval-mode plan`},
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
