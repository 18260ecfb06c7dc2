// Package proxy is the always-on model-traffic proxy: it resolves the
// placeholder an agent presents to a grant (role, task), routes by role to the
// configured upstream, strips what the client presented and injects the real
// credential for the target actually called, streams responses unbuffered,
// and reports every request as a traffic event. Sandboxed agents reach it
// through their own task's Unix socket (Sockets), so it knows the task a
// request comes from and caps each task's connections. It also owns the grant
// registry file (proxy-tokens.json). No real credential is ever written to a
// log, an event or the registry.
package proxy

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Grant is what a placeholder resolves to.
type Grant struct {
	Placeholder string     `json:"placeholder"`
	Role        string     `json:"role"`
	TaskRef     string     `json:"task_ref"`
	TaskID      string     `json:"task_id"`
	EnvVar      string     `json:"env_var"`
	Local       bool       `json:"local,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"` // nil: valid until the task ends
}

// Grants is the registry: placeholder → grant.
type Grants map[string]Grant

// LoadGrants reads the registry file; a missing file is an empty registry.
func LoadGrants(path string) (Grants, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Grants{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grant registry %s: %w", path, err)
	}
	var list []Grant
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("grant registry %s is corrupt (%v): move it aside; running tasks then need a relaunch", path, err)
	}
	g := make(Grants, len(list))
	for _, x := range list {
		g[x.Placeholder] = x
	}
	return g, nil
}

// Save writes the registry atomically with mode 0600.
func (g Grants) Save(path string) error {
	list := make([]Grant, 0, len(g))
	for _, x := range g {
		list = append(list, x)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].TaskID != list[j].TaskID {
			return list[i].TaskID < list[j].TaskID
		}
		return list[i].EnvVar < list[j].EnvVar
	})
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b, 0o600)
}

// WriteFileAtomic writes data to a temp file beside path, syncs it and
// renames it over path, so a reader sees the old or the new file, never half.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// knownPrefixes are the public prefixes of real credentials. A placeholder
// copies one only when the real credential starts with it; everything else
// gets its kind's fixed prefix, so a placeholder never carries a byte of a
// secret that is not public.
var knownPrefixes = []string{"sk-ant-api03-", "sk-ant-oat01-", "sk-ant-admin01-", "sk-ant-ort01-"}

// defaultPrefix is the kind's fixed prefix.
var defaultPrefix = map[string]string{
	"api_key":    "sk-ant-api03-",
	"oauth":      "sk-ant-oat01-",
	"auth_token": "sk-ant-",
}

// KindOpenAI mints for an OpenAI API key (OPENAI_API_KEY, the codex
// driver): sk-proj-svc-… when the real key is a project key, sk-svc-…
// otherwise.
const KindOpenAI = "openai"

// openAIPrefixes are the public prefixes of OpenAI keys, longest first.
var openAIPrefixes = []string{"sk-svcacct-", "sk-admin-", "sk-proj-"}

// PlaceholderPrefix is the real credential's own public prefix (e.g.
// "sk-ant-api03-") when it has a known one, else the kind's fixed prefix.
func PlaceholderPrefix(kind, real string) string {
	if kind == KindOpenAI {
		for _, p := range openAIPrefixes {
			if strings.HasPrefix(real, p) && len(real) > len(p) {
				return p
			}
		}
		return "sk-"
	}
	for _, p := range knownPrefixes {
		if strings.HasPrefix(real, p) && len(real) > len(p) {
			return p
		}
	}
	if p, ok := defaultPrefix[kind]; ok {
		return p
	}
	return "sk-ant-"
}

// randomPart is 192 bits of crypto randomness, base64url (32 characters).
func randomPart() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// NewPlaceholder mints a placeholder shaped like the real credential:
// its prefix, "svc-", then a random part. A Gemini key (KindGemini) has a
// fixed shape, "AIza" and 35 characters of [A-Za-z0-9_-], 39 in all: its
// placeholder is "AIza", "svc-" (whose characters are all in that
// alphabet) and 31 random characters (186 bits), so the client and any
// format check take it for a key while the proxy and a reader still see
// the marker.
func NewPlaceholder(kind, real string) string {
	if kind == KindGemini {
		return GeminiKeyPrefix + "svc-" + randomPart()[:markLen]
	}
	return PlaceholderPrefix(kind, real) + "svc-" + randomPart()
}

// KindGemini is the placeholder kind of a Gemini API key (GEMINI_API_KEY).
const KindGemini = "gemini"

// GeminiKeyPrefix starts every Gemini API key; GeminiKeyLen is its length.
const (
	GeminiKeyPrefix = "AIza"
	GeminiKeyLen    = 39
)

// NewEditorPlaceholder mints the editor agent's placeholder: key_svc_<random>.
func NewEditorPlaceholder() string { return "key_svc_" + randomPart() }
