package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCodexArgv(t *testing.T) {
	common := []string{"--json", "--skip-git-repo-check", "-c", `approval_policy="never"`}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		sandboxed bool
		ask       bool
		session   string
		want      []string
	}{
		{"first work turn in a sandbox", true, false, "", join([]string{"exec"}, common, []string{"--dangerously-bypass-approvals-and-sandbox", "-"})},
		{"resumed work turn in a sandbox", true, false, "S1", join([]string{"exec", "resume"}, common, []string{"--dangerously-bypass-approvals-and-sandbox", "S1", "-"})},
		{"work turn with no sandbox", false, false, "S1", join([]string{"exec", "resume"}, common, []string{"-c", `sandbox_mode="workspace-write"`, "S1", "-"})},
		{"ask", true, true, "S1", join([]string{"exec", "resume"}, common, []string{"-c", `sandbox_mode="read-only"`, "S1", "-"})},
		{"ask with no sandbox", false, true, "S1", join([]string{"exec", "resume"}, common, []string{"-c", `sandbox_mode="read-only"`, "S1", "-"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Codex{}.InSandbox(tc.sandboxed)
			got := d.WorkArgv(tc.session)
			if tc.ask {
				got = d.AskArgv(tc.session)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCodexParseResult(t *testing.T) {
	ok := `WARNING: a notice
{"type":"thread.started","thread_id":"0199-abc"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata not found"}}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"first"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"the answer"}}
{"type":"turn.completed","usage":{"input_tokens":1}}
`
	r, err := Codex{}.ParseResult([]byte(ok))
	if err != nil || r.SessionID != "0199-abc" || r.Text != "the answer" || r.IsError {
		t.Fatalf("%+v %v", r, err)
	}
	failed := `{"type":"thread.started","thread_id":"T"}
{"type":"error","message":"Quota exceeded."}
{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan"}}
`
	r, err = Codex{}.ParseResult([]byte(failed))
	if err != nil || !r.IsError || r.SessionID != "T" || !strings.Contains(r.Text, "Quota exceeded") {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := (Codex{}).ParseResult([]byte("no json here\n")); err == nil {
		t.Fatal("output with no events parsed")
	}
}

// TestCodexWriteHome: the configuration lands in the home over whatever
// the agent left there, a link included, and holds no key.
func TestCodexWriteHome(t *testing.T) {
	home := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, ".codex", "config.toml")); err != nil {
		t.Fatal(err)
	}
	if err := (Codex{}).WriteHome(home, "http://127.0.0.1:26011"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`model_provider = "lazy"`, `base_url = "http://127.0.0.1:26011/v1"`, `env_key = "OPENAI_API_KEY"`, `wire_api = "responses"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.toml lacks %s:\n%s", want, b)
		}
	}
	if kept, _ := os.ReadFile(outside); string(kept) != "keep" {
		t.Error("the link's target was written")
	}
}

// TestConfigurers: both drivers answer the launcher's one hook: codex its
// turn's driver for the runner and its config.toml, gemini its variables
// and settings.json; neither holds a key.
func TestConfigurers(t *testing.T) {
	for _, drv := range []Driver{Codex{}, Gemini{}} {
		c, ok := drv.(Configurer)
		if !ok {
			t.Fatalf("%s is no Configurer", drv.Name())
		}
		for _, sandboxed := range []bool{false, true} {
			cl := c.Configure("http://127.0.0.1:9", sandboxed)
			if len(cl.Files) != 1 {
				t.Errorf("%s: files %+v", drv.Name(), cl.Files)
			}
			for _, f := range cl.Files {
				if strings.Contains(string(f.Body), "sk-") || strings.Contains(string(f.Body), "AIza") {
					t.Errorf("%s: a key in %s", drv.Name(), f.Path)
				}
			}
			if drv.Name() == "codex" {
				argv := strings.Join(cl.Driver.WorkArgv(""), " ")
				if sandboxed != strings.Contains(argv, "--dangerously-bypass-approvals-and-sandbox") {
					t.Errorf("codex sandboxed=%v: argv %s", sandboxed, argv)
				}
			} else if cl.Driver != nil || !strings.Contains(strings.Join(cl.Env, " "), "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9") {
				t.Errorf("gemini: %+v", cl)
			}
		}
	}
}
