package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"lazy/api"
	"lazy/client"
)

// TestReviewStateSurvivesRestart: the reviewer's state (a file viewed at
// its diff's content, a thread resolved, the head last reviewed) is the
// daemon's, in its store: it is there after the daemon restarts, through
// the RPC and on the page the daemon renders (before any script runs).
// Resolving a thread leaves its queued comment queued and says so; wrong
// input is refused with what to do.
func TestReviewStateSurvivesRestart(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rs", "-m", fourLines)
	ti := p.waitStatus("rs", "blocked")
	c := p.post("rs", api.PostCommentArgs{Body: "call it two", File: "a.go", Line: 2, Side: "new", Intent: "comment"})
	m := regexp.MustCompile(`data-path="a.go" data-diff-hash="([0-9a-z]+)"`).FindStringSubmatch(p.page("/review/" + ti.ID))
	if m == nil {
		t.Fatal("the review page has no diff hash for a.go")
	}
	hash := m[1]
	ctx := context.Background()
	call := func(cmd string, args map[string]any) *api.ReviewState {
		t.Helper()
		var st api.ReviewState
		if err := p.rpc().Call(ctx, cmd, args, &st); err != nil {
			t.Fatalf("%s %v: %v", cmd, args, err)
		}
		return &st
	}
	call("reviewViewed", map[string]any{"task": "rs", "file": "a.go", "hash": hash, "viewed": true})
	st := call("reviewResolve", map[string]any{"task": "rs", "thread_id": c.ThreadID, "resolved": true})
	if !strings.Contains(st.Notice, "still goes to the agent with the next unblock") || st.Resolved[c.ThreadID].Queued != 1 {
		t.Errorf("resolving a thread with a queued comment: notice %q, mark %+v", st.Notice, st.Resolved[c.ThreadID])
	}
	if pl := p.threads("rs"); len(pl.Queued) != 1 {
		t.Errorf("resolving withdrew the queued comment: %+v", pl.Queued)
	}
	// a commit the project has (the parent's head): the link runs from it
	seen := strings.TrimSpace(runGit(t, p.root, "rev-parse", "main"))
	call("reviewSeen", map[string]any{"task": "rs", "head": seen})

	for _, bad := range []struct {
		cmd  string
		args map[string]any
		want string
	}{
		{"reviewViewed", map[string]any{"task": "rs", "file": "a.go", "hash": "<x>", "viewed": true}, "diff hash"},
		{"reviewViewed", map[string]any{"task": "rs", "hash": hash, "viewed": true}, "name the file"},
		{"reviewViewed", map[string]any{"task": "rs", "file": "not/in/the/diff.go", "hash": hash, "viewed": true}, "is not a changed file"},
		{"reviewResolve", map[string]any{"task": "rs", "thread_id": "nosuch", "resolved": true}, "is not on task"},
		{"reviewSeen", map[string]any{"task": "rs", "head": "main"}, "commit id"},
		{"reviewSeen", map[string]any{"task": "rs", "head": "0123456789abcdef0123456789abcdef01234567"}, "no commit of this project"},
		{"reviewState", map[string]any{"task": "nosuch"}, "nosuch"},
	} {
		var ce *client.Error
		if err := p.rpc().Call(ctx, bad.cmd, bad.args, nil); !errors.As(err, &ce) || ce.Status/100 != 4 || !strings.Contains(ce.Message, bad.want) {
			t.Errorf("%s %v: got %v, want a 4xx saying %q", bad.cmd, bad.args, err, bad.want)
		}
	}

	p.lazy(0, "daemon", "stop")
	p.lazy(0, "daemon", "start")

	st = call("reviewState", map[string]any{"task": "rs"})
	if st.Reviewer != api.Owner || st.Viewed["a.go"] != hash || len(st.Viewed) != 1 {
		t.Errorf("viewed after a restart: %+v", st)
	}
	if r, ok := st.Resolved[c.ThreadID]; !ok || r.Messages != 1 || r.By != api.Owner || r.Queued != 1 {
		t.Errorf("resolved after a restart: %+v", st.Resolved)
	}
	if st.Head != seen {
		t.Errorf("head after a restart: %q, want %s", st.Head, seen)
	}
	page := p.page("/review/" + ti.ID)
	for _, want := range []string{
		`<input type="checkbox" class="viewed-box" checked>`,
		`<li data-nav-file="a.go" class="viewed">`,
		`data-thread="` + c.ThreadID + `" open>`, // resolved, but open: its comment still goes
		`<span class="tag resolved-tag">resolved</span>`,
		`class="resolved-queued"`,
		`href="?since=` + seen + `"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page after a restart lacks %s", want)
		}
	}
	if !strings.Contains(page, `class="thread resolved"`) && !strings.Contains(page, `resolved" data-thread="`+c.ThreadID) {
		t.Error("the resolved thread is not marked resolved on the page")
	}

	// a changed diff voids the viewed mark; unresolve and unview take them off
	call("reviewViewed", map[string]any{"task": "rs", "file": "a.go", "hash": "0ther", "viewed": true})
	if page := p.page("/review/" + ti.ID); strings.Contains(page, `class="viewed-box" checked`) {
		t.Error("a mark on another content of a.go shows it viewed")
	}
	call("reviewViewed", map[string]any{"task": "rs", "file": "a.go", "viewed": false})
	st = call("reviewResolve", map[string]any{"task": "rs", "thread_id": c.ThreadID, "resolved": false})
	if len(st.Viewed) != 0 || len(st.Resolved) != 0 {
		t.Errorf("after unview and unresolve: %+v", st)
	}
}
