package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckCredential(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, kind, body string
		want             string // "" = usable
	}{
		{"api key", "api_key", "sk-ant-api03-abc\n", ""},
		{"oauth token", "oauth", "sk-ant-oat01-abc\n", ""},
		{"gateway token", "auth_token", "gw-123", ""},
		{"json", "api_key", `{"token":"sk-ant-api03-abc","expires_at":"2027-01-01T00:00:00Z"}`, ""},
		{"editor", "editor", "key_abc", ""},
		{"empty", "api_key", "", "is empty"},
		{"whitespace", "oauth", " \n", "holds only whitespace"},
		{"two tokens", "api_key", "a b", "more than one token"},
		{"quoted", "api_key", `"sk-ant-api03-abc"`, "no token has"},
		{"claude login", "oauth", `{"claudeAiOauth":{}}`, "claude setup-token"},
		{"unknown field", "api_key", `{"token":"x","expiry":"y"}`, `unknown field "expiry"`},
		{"no token", "api_key", `{"expires_at":"2027-01-01T00:00:00Z"}`, `has no "token"`},
		{"token not a string", "api_key", `{"token":5}`, "not a string"},
		{"bad json", "api_key", `{"token":`, "not valid JSON"},
		{"oauth as api_key", "api_key", "sk-ant-oat01-abc", `set kind = "oauth"`},
		{"api key as oauth", "oauth", "sk-ant-api03-abc", `set kind = "api_key"`},
		{"api key as auth_token (a gateway's)", "auth_token", "sk-ant-api03-abc", ""},
		{"expired", "api_key", `{"token":"sk-ant-api03-abc","expires_at":"2025-01-01T00:00:00Z"}`, "expired at 2025-01-01T00:00:00Z"},
		{"bad expiry", "api_key", `{"token":"sk-ant-api03-abc","expires_at":"soon"}`, "not RFC 3339"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			err := checkCredential(path, c.kind, now)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("got %v, want usable", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("got %v, want %q and the path", err, c.want)
			}
		})
	}
	err := checkCredential(filepath.Join(dir, "none"), "api_key", now)
	if !isMissing(err) || !strings.Contains(err.Error(), "no provider credential at") {
		t.Fatalf("missing file: got %v", err)
	}
}
