package actors

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazy/agent"
	"lazy/store"
)

// homeStore is a HomeStore of function fields.
type homeStore struct {
	save func(archive []byte, at time.Time) error
	load func() ([]byte, time.Time, error)
}

func (h *homeStore) SaveAgentHome(_ context.Context, _ string, archive []byte, at time.Time) error {
	return h.save(archive, at)
}

func (h *homeStore) AgentHome(context.Context, string) ([]byte, time.Time, error) {
	return h.load()
}

// outsideSecret is a file outside every home, like /etc/passwd or the
// daemon's own credentials.
func outsideSecret(t *testing.T) (dir, file string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "etc")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "passwd")
	if err := os.WriteFile(file, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func agentHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "agents", "t1", "home")
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "s.jsonl"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestAgentHomeSymlinkMarkers is attack 7: the agent plants links where the
// daemon keeps its markers (.lazy-home-at, .lazy-home-cwd), to a file
// outside its home and to a path that does not exist yet. After the turn
// the daemon writes its markers and packs the home: the links are replaced
// by the markers, the files they pointed at are untouched, nothing is
// created outside the home, and nothing outside reaches the archive.
func TestAgentHomeSymlinkMarkers(t *testing.T) {
	etc, passwd := outsideSecret(t)
	home := agentHome(t)
	if err := os.Symlink(passwd, filepath.Join(home, homeMark)); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(etc, "cron.d-evil")
	if err := os.Symlink(dangling, filepath.Join(home, homeCwd)); err != nil {
		t.Fatal(err)
	}
	var saved []byte
	tr := &travel{log: discard(), kind: jobAsk, taskID: "t1", home: home, worktree: "/state/worktrees/t1.x",
		homes: &homeStore{save: func(a []byte, _ time.Time) error { saved = a; return nil }}}
	tr.depart(context.Background())

	if b, _ := os.ReadFile(passwd); string(b) != "root:x:0:0:root:/root:/bin/sh\n" {
		t.Fatalf("the file a marker linked to was overwritten: %q", b)
	}
	if _, err := os.Lstat(dangling); !os.IsNotExist(err) {
		t.Fatalf("a dangling marker link made a file outside the home: %v", err)
	}
	for name, want := range map[string]string{homeCwd: "/state/worktrees/t1.x", homeMark: ""} {
		fi, err := os.Lstat(filepath.Join(home, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s after the turn: %v %v, want a regular file", name, fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(home, name)); want != "" && string(b) != want {
			t.Errorf("%s holds %q, want %q", name, b, want)
		}
	}
	if saved == nil {
		t.Fatal("the home was not kept")
	}
	zr, err := gzip.NewReader(bytes.NewReader(saved))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if bytes.Contains(raw, []byte("root:x:0:0")) {
		t.Fatal("the archive carries the file outside the home")
	}
}

// TestAgentHomeThatIsALink: the home itself replaced by a link to a
// directory outside: the daemon writes nothing there and keeps nothing.
func TestAgentHomeThatIsALink(t *testing.T) {
	etc, _ := outsideSecret(t)
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(etc, home); err != nil {
		t.Fatal(err)
	}
	tr := &travel{log: discard(), kind: jobWork, taskID: "t1", home: home, worktree: "/w",
		homes: &homeStore{save: func([]byte, time.Time) error { t.Error("a linked home was kept"); return nil }}}
	tr.depart(context.Background())
	ents, _ := os.ReadDir(etc)
	if len(ents) != 1 {
		t.Fatalf("the directory the home linked to holds %d entries, want only passwd", len(ents))
	}
}

// TestBringHomeReadsMarkersBounded: the marker the daemon reads before it
// restores a home is a link to a pipe (a read would wait forever) or to
// /dev/zero (a read would never end): the arrival neither hangs nor
// grows, and restores the home from the store.
func TestBringHomeReadsMarkersBounded(t *testing.T) {
	from := agentHome(t)
	if err := os.WriteFile(filepath.Join(from, homeCwd), []byte("/member-a/worktrees/t1.x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(from, ".claude", "projects", "-member-a-worktrees-t1-x"), 0o700); err != nil {
		t.Fatal(err)
	}
	archive, err := agent.ArchiveHome(from)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	for _, target := range []string{"pipe", "/dev/zero"} {
		t.Run(strings.TrimPrefix(target, "/dev/"), func(t *testing.T) {
			home := agentHome(t)
			if target == "pipe" {
				target = filepath.Join(home, "pipe")
				if err := syscall.Mkfifo(target, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(target, filepath.Join(home, homeMark)); err != nil {
				t.Fatal(err)
			}
			tr := &travel{log: discard(), kind: jobAsk, taskID: "t1", home: home, worktree: "/member-b/worktrees/t1.x",
				homes: &homeStore{load: func() ([]byte, time.Time, error) { return archive, at, nil }}}
			done := make(chan error, 1)
			go func() { done <- tr.bringHome(context.Background()) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("bringing the home hung on a marker")
			}
			if _, err := os.Stat(filepath.Join(home, ".claude", "projects", "-member-b-worktrees-t1-x")); err != nil {
				t.Errorf("the sessions were not re-keyed to this member's worktree: %v", err)
			}
			if fi, err := os.Lstat(filepath.Join(home, homeMark)); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("the marker after the arrival: %v %v", fi, err)
			}
		})
	}
	// the store has nothing yet: nothing to do
	tr := &travel{log: discard(), kind: jobAsk, home: agentHome(t),
		homes: &homeStore{load: func() ([]byte, time.Time, error) { return nil, time.Time{}, store.ErrNotFound }}}
	if err := tr.bringHome(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestParseHomeCwd: the worktree a home records is an absolute clean path,
// or the arrival is refused.
func TestParseHomeCwd(t *testing.T) {
	for in, ok := range map[string]bool{
		"/state/worktrees/t1.x":            true,
		"":                                 false,
		"relative/path":                    false,
		"/a/../../etc":                     false,
		"/a\n/b":                           false,
		"/" + strings.Repeat("x", maxMark): false,
		"/a/\xff":                          false,
	} {
		if _, err := parseHomeCwd([]byte(in)); (err == nil) != ok {
			t.Errorf("parseHomeCwd(%q): %v, want ok=%v", in, err, ok)
		}
	}
}

// FuzzParseHomeCwd: whatever a home's marker holds, the parse accepts only
// a path whose session key stays one directory name beneath the home.
func FuzzParseHomeCwd(f *testing.F) {
	for _, s := range []string{"/state/worktrees/t1.x", "", "../x", "/a/../b", "/\x00", strings.Repeat("/a", 3000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseHomeCwd(b)
		if err != nil {
			return
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || len(p) > maxMark || strings.ContainsAny(p, "\x00\n") {
			t.Fatalf("accepted %q", p)
		}
	})
}

// TestAgentHomeKeptWhenTheStoreRefuses: a turn's home cannot be kept in the
// store (a store outage): the home here, newer than the store's archive,
// keeps that archive's mark, so the next job on this member keeps it (the
// session the turn made) rather than bring the older archive back.
func TestAgentHomeKeptWhenTheStoreRefuses(t *testing.T) {
	home := agentHome(t)
	old, err := agent.ArchiveHome(home)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	if err := writeMarks(home, map[string]string{homeMark: before.Format(time.RFC3339Nano)}); err != nil {
		t.Fatal(err)
	}
	// the turn makes a new session; the store does not answer
	if err := os.WriteFile(filepath.Join(home, ".claude", "s2.jsonl"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	homes := &homeStore{save: func([]byte, time.Time) error { return errors.New("the store does not answer (test)") },
		load: func() ([]byte, time.Time, error) { return old, before, nil }}
	tr := &travel{log: discard(), kind: jobWork, taskID: "t1", home: home, worktree: "/w", homes: homes}
	tr.depart(context.Background())
	if err := tr.bringHome(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude", "s2.jsonl")); err != nil {
		t.Fatalf("the next job brought the store's older home back over the turn's session: %v", err)
	}
}

// TestBringHomeWaitsForTheStore: the store does not answer as a job
// arrives (an outage that began as the job started): the home is read
// again until it does, and the turn goes on with it.
func TestBringHomeWaitsForTheStore(t *testing.T) {
	src := agentHome(t)
	archive, err := agent.ArchiveHome(src)
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	homes := &homeStore{load: func() ([]byte, time.Time, error) {
		if tries++; tries < 3 {
			return nil, time.Time{}, errors.New("FATAL: terminating connection due to administrator command (test)")
		}
		return archive, time.Now().UTC(), nil
	}}
	home := filepath.Join(t.TempDir(), "home")
	tr := &travel{log: discard(), kind: jobWork, taskID: "t1", home: home, worktree: "/w", homes: homes}
	if err := tr.bringHome(context.Background()); err != nil {
		t.Fatalf("the arrival failed for an outage of two reads: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude", "s.jsonl")); err != nil || tries != 3 {
		t.Errorf("after %d reads the home has its session: %v", tries, err)
	}
}
