package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Where a daemon is reached is part of the wire contract (CONTRACT §1): the
// service home ($LAZY_HOME, or ~/.lazy) and each project's state directory
// under it, <home>/daemon/<slug>, with daemon.json (DaemonInfo) and the
// auth token the RPC presents. The client reads them from here, on the
// standard library alone; the daemon writes them, through the same
// functions. Nothing here reads an environment
// of its own (the caller passes it in) or creates a file.

// LazyHome is the service home: $LAZY_HOME from environ, or ~/.lazy.
func LazyHome(environ []string) (string, error) {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LAZY_HOME="); ok && v != "" {
			return filepath.Abs(v)
		}
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find home directory: %w (set LAZY_HOME)", err)
	}
	return filepath.Join(h, ".lazy"), nil
}

// CredentialsDir is where the credential files live when the config names
// none: <home>/credentials (credentials.*.file).
func CredentialsDir(home string) string { return filepath.Join(home, "credentials") }

// StateSlug names a project's state dir: base name, "-", 8 hex of
// sha256(root).
func StateSlug(root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Base(root) + "-" + hex.EncodeToString(sum[:])[:8]
}

// Paths are the files of one project's state directory.
type Paths struct {
	Home, Root, State                                   string
	DaemonJSON, AuthToken, ProxyTokens, DB, Passphrase  string
	DashboardToken                                      string
	CanaryKey                                           string // the key the sandbox homes' decoys are derived from (package canary)
	LogDir, Log, Agents, Worktrees, FileStore, Recovery string
	CredentialsDir                                      string
	// Outbox keeps the ends of agent turns the store could not take when
	// they ended, until it has them (package actors)
	Outbox string
}

// StatePaths lays out the state directory of the project at root, under
// home.
func StatePaths(home, root string) Paths {
	st := filepath.Join(home, "daemon", StateSlug(root))
	return Paths{
		Home: home, Root: root, State: st,
		DaemonJSON:     filepath.Join(st, "daemon.json"),
		AuthToken:      filepath.Join(st, "auth-token"),
		DashboardToken: filepath.Join(st, "dashboard-token"),
		CanaryKey:      filepath.Join(st, "canary-key"),
		ProxyTokens:    filepath.Join(st, "proxy-tokens.json"),
		DB:             filepath.Join(st, "lazy.db"),
		Passphrase:     filepath.Join(st, "passphrase"),
		LogDir:         filepath.Join(st, "logs"),
		Log:            filepath.Join(st, "logs", "daemon.log"),
		Agents:         filepath.Join(st, "agents"),
		Worktrees:      filepath.Join(st, "worktrees"),
		FileStore:      filepath.Join(st, "store"),
		Outbox:         filepath.Join(st, "outbox"),
		Recovery:       filepath.Join(root, ".lazy", "recovery"),
		CredentialsDir: CredentialsDir(home),
	}
}
