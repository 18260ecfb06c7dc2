package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"lazy/api"
	"lazy/config"
	"lazy/proxy"
)

// Credential files are checked where a user can still fix them, never
// left for a turn to fail on later with the proxy's terse refusal:
//
//   - at start: a file that is there but unusable (empty, whitespace only,
//     not the shape its kind takes, expired) stops the daemon with its path
//     and the fix. A missing provider file does not: a project may run
//     local roles only, or write the file after the start; the start and
//     the status warn, and `task new` and every turn refuse, naming it.
//   - on a config reload: a config whose credential file is unusable is
//     not applied (the daemon keeps the settings it had and says why).
//   - at `task new`, before every turn's placeholders are minted, and on
//     the status: the file as it is now, so a rotation gone wrong is named.

// noCredentialFile is a credential file that does not exist.
type noCredentialFile struct{ msg string }

func (e *noCredentialFile) Error() string { return e.msg }

// isMissing reports whether err is a credential file that does not exist.
func isMissing(err error) bool {
	var nf *noCredentialFile
	return errors.As(err, &nf)
}

// credentialKindEditor is the editor agent's key (no kind of its own);
// credentialKindOpenAI the OpenAI key the codex driver's calls get;
// credentialKindGemini the Gemini API key ([credentials.gemini]).
const (
	credentialKindEditor = "editor"
	credentialKindOpenAI = "openai"
	credentialKindGemini = "gemini"
)

// checkCredential reads the credential file at path as kind (a provider
// kind, or credentialKindEditor) and says what is wrong with it, naming
// the path and the fix; nil when a request could use it now.
func checkCredential(path, kind string, now time.Time) error {
	what := "provider credential"
	switch kind {
	case credentialKindEditor:
		what = "editor key"
	case credentialKindOpenAI:
		what = "OpenAI key"
	case credentialKindGemini:
		what = "Gemini API key"
	}
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return &noCredentialFile{fmt.Sprintf("no %s at %s: write it there (mode 0600; see docs/GUIDE.md \"Credentials\"), or set credentials.%s.file in %s",
			what, path, sectionOf(kind), config.FileName)}
	}
	if err != nil {
		return fmt.Errorf("%s file %s: %w", what, path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s file %s is not a regular file: write the token into a file there", what, path)
	}
	if st.Size() > 64<<10 {
		return fmt.Errorf("%s file %s is %d bytes, not a token: write the bare token there, or {\"token\": \"...\", \"expires_at\": \"RFC 3339\"}", what, path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s file %s: %w", what, path, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		empty := "is empty"
		if len(b) > 0 {
			empty = "holds only whitespace"
		}
		return fmt.Errorf("%s file %s %s (a recipe like `echo \"$KEY\" > file` writes that when the variable is unset): write the %s there: %s",
			what, path, empty, tokenName(kind), recipe(path))
	}
	if err := jsonShape(b); err != nil {
		return fmt.Errorf("%s file %s: %v", what, path, err)
	}
	cred, err := proxy.ParseCredential(b)
	if err != nil {
		return fmt.Errorf("%s file %s: %v", what, path, err)
	}
	if err := tokenShape(cred.Value, kind); err != nil {
		return fmt.Errorf("%s file %s: %v", what, path, err)
	}
	if cred.Expired(now) {
		return fmt.Errorf("%s file %s expired at %s: write a new %s there (%s); the next request uses it, no restart",
			what, path, cred.ExpiresAt.Format(time.RFC3339), tokenName(kind), recipe(path))
	}
	return nil
}

// jsonShape refuses JSON that is not lazy's {"token", "expires_at"}: the
// claude CLI's own login file, unknown fields, a token that is no string.
func jsonShape(b []byte) error {
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "{") {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &fields); err != nil {
		return fmt.Errorf("is not valid JSON (%v): write the bare token, or {\"token\": \"...\", \"expires_at\": \"RFC 3339\"}", err)
	}
	if _, ok := fields["claudeAiOauth"]; ok {
		return errors.New("is the claude CLI's own login file (.credentials.json), whose token expires within hours: run `claude setup-token` and write the long-lived token it prints there, bare, with kind = \"oauth\"")
	}
	var unknown []string
	for k := range fields {
		if k != "token" && k != "expires_at" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("has the unknown field %q: the JSON form is {\"token\": \"...\", \"expires_at\": \"RFC 3339\"} (expires_at optional)", unknown[0])
	}
	raw, ok := fields["token"]
	if !ok {
		return errors.New("has no \"token\": the JSON form is {\"token\": \"...\", \"expires_at\": \"RFC 3339\"}")
	}
	var tok string
	if err := json.Unmarshal(raw, &tok); err != nil || strings.TrimSpace(tok) == "" {
		return errors.New("has a \"token\" that is empty or not a string: put the token there as a string")
	}
	return nil
}

// Token prefixes of Anthropic's credentials.
const (
	prefixAPIKey = "sk-ant-api"
	prefixOAuth  = "sk-ant-oat"
)

// tokenShape refuses a token that cannot be what kind says: characters no
// token has, or an Anthropic key of another kind (the provider would
// answer 401 on every call).
func tokenShape(v, kind string) error {
	for _, r := range v {
		if r < 0x21 || r > 0x7e || r == '"' || r == '\'' {
			return fmt.Errorf("the token holds %q, which no token has (quotes, spaces or other characters around it?): write the bare token", r)
		}
	}
	// auth_token is whatever a gateway takes as a bearer token: any shape
	switch {
	case strings.HasPrefix(v, prefixOAuth) && kind == config.KindAPIKey:
		return fmt.Errorf("holds an OAuth token (%s…, from `claude setup-token`) but credentials.provider.kind = %q: set kind = \"oauth\" in %s", prefixOAuth, kind, config.FileName)
	case strings.HasPrefix(v, prefixAPIKey) && kind == config.KindOAuth:
		return fmt.Errorf("holds an API key (%s…) but credentials.provider.kind = %q: set kind = \"api_key\" in %s", prefixAPIKey, kind, config.FileName)
	}
	return nil
}

func sectionOf(kind string) string {
	switch kind {
	case credentialKindEditor, credentialKindOpenAI, credentialKindGemini:
		return kind
	}
	return "provider"
}

func tokenName(kind string) string {
	switch kind {
	case config.KindOAuth:
		return "OAuth token (`claude setup-token` prints one)"
	case config.KindAuthToken:
		return "bearer token"
	case credentialKindEditor:
		return "editor agent's key"
	case credentialKindOpenAI:
		return "OpenAI API key (sk-proj-… or sk-…)"
	case credentialKindGemini:
		return "Gemini API key (AIza…, from Google AI Studio)"
	}
	return "API key"
}

// recipe writes a token read from the terminal, never an empty file.
func recipe(path string) string {
	return fmt.Sprintf("read -rs TOKEN && install -m 600 /dev/stdin %s <<<\"${TOKEN:?empty}\"", path)
}

// credentialChecks checks every credential file cfg needs: the provider's
// when some upstream takes it, the editor's when its file exists. missing
// is the missing provider file (the start warns), fatal the first file
// that is there but unusable.
func credentialChecks(cfg *config.Config, home string, now time.Time) (missing, fatal error) {
	if needsProviderFile(cfg) {
		if err := checkCredential(cfg.ProviderCredentialFile(home), cfg.Credentials.Provider.Kind, now); isMissing(err) {
			missing = err
		} else if err != nil {
			return nil, err
		}
	}
	if err := checkCredential(cfg.EditorCredentialFile(home), credentialKindEditor, now); err != nil && !isMissing(err) {
		return missing, err
	}
	if needsOpenAIFile(cfg) {
		if err := checkCredential(cfg.OpenAICredentialFile(home), credentialKindOpenAI, now); isMissing(err) {
			if missing == nil {
				missing = err
			}
		} else if err != nil {
			return missing, err
		}
	}
	if needsGeminiFile(cfg) {
		if err := checkCredential(cfg.GeminiCredentialFile(home), credentialKindGemini, now); isMissing(err) {
			if missing == nil {
				missing = err
			}
		} else if err != nil {
			return missing, err
		}
	}
	return missing, nil
}

// needsProviderFile reports whether some upstream of cfg takes the
// provider credential.
func needsProviderFile(cfg *config.Config) bool {
	targets, err := cfg.Targets()
	if err != nil {
		return true
	}
	for _, t := range targets {
		if t.Credential == config.CredentialProvider {
			return true
		}
	}
	return false
}

// needsOpenAIFile reports whether [proxy.openai] takes [credentials.openai].
func needsOpenAIFile(cfg *config.Config) bool {
	return cfg.Proxy.OpenAI.Credential == config.CredentialProvider
}

// needsGeminiFile reports whether [proxy.gemini] takes [credentials.gemini].
func needsGeminiFile(cfg *config.Config) bool {
	return cfg.Proxy.Gemini.Credential == config.CredentialProvider
}

// CheckCredentials is the start's check of the credential files of the
// project at root, for the CLI to refuse before it starts a daemon: nil,
// or the first file that is there but unusable, with its path and fix.
func CheckCredentials(root string, environ []string) error {
	home, err := api.LazyHome(environ)
	if err != nil {
		return err
	}
	cfg, err := config.Load(root, environ)
	if err != nil {
		return err
	}
	_, fatal := credentialChecks(cfg, home, time.Now())
	return fatal
}
