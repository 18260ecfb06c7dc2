package main

import (
	"context"
	"encoding/json"
	"html"
	"strings"
	"testing"
	"time"

	"lazy/api"
)

// TestRenameTask: `lazy task rename` (the command added through the typed
// seam, docs/ARCHITECTURE.md "How to add a command") reaches the task's
// actor, and every surface shows the new title, escaped; a bad title is
// refused with what to do, and an ended task keeps its own.
func TestRenameTask(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rn", "-m", writeAndCommit)
	p.waitStatus("rn", "blocked")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watch(ctx, "--task", "rn")

	title := `Login <b>& logout</b>`
	if out := p.lazy(0, "task", "rename", "rn", "--title", "  "+title+" "); strings.TrimSpace(out) != "rn: "+title {
		t.Fatalf("rename printed %q", out)
	}
	if ti := p.show("rn"); ti.Title != title {
		t.Fatalf("task show: title %q", ti.Title)
	}
	var ts []api.TaskInfo
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "list", "--json")), &ts); err != nil || len(ts) != 1 || ts[0].Title != title {
		t.Fatalf("task list --json: %v %+v", err, ts)
	}
	var q []api.QueueItem
	if err := p.rpc().Call(ctx, "reviewQueue", nil, &q); err != nil || len(q) != 1 || q[0].Task.Title != title {
		t.Fatalf("review queue: %v %+v", err, q)
	}
	for _, path := range []string{"/", "/review"} {
		page := p.page(path)
		if !strings.Contains(page, html.EscapeString(title)) || strings.Contains(page, "<b>&") {
			t.Errorf("%s does not show the title escaped", path)
		}
	}
	got := strings.Join(collect(lines, time.Second), "\n")
	if !strings.Contains(got, "title renamed: "+title) {
		t.Errorf("watch shows no rename:\n%s", got)
	}

	for _, bad := range []struct{ title, says string }{
		{" ", "the title is empty"},
		{strings.Repeat("x", 201), "keep it to 200"},
		{"two\nlines", "one line"},
		{"bell\a", "one line"},
	} {
		_, errOut, code := p.run("task", "rename", "rn", "--title", bad.title)
		if code != 1 || !strings.Contains(errOut, bad.says) {
			t.Errorf("title %q: exit %d, %q", bad.title, code, errOut)
		}
	}
	if _, errOut, code := p.run("task", "rename", "rn"); code != 2 || !strings.Contains(errOut, "title") {
		t.Errorf("rename without --title: exit %d, %q", code, errOut)
	}
	if _, errOut, code := p.run("task", "rename", "nosuch", "--title", "x"); code != 1 || !strings.Contains(errOut, "nosuch") {
		t.Errorf("rename of no task: exit %d, %q", code, errOut)
	}
	if ti := p.show("rn"); ti.Title != title {
		t.Errorf("a refused rename changed the title to %q", ti.Title)
	}

	p.lazy(0, "task", "cancel", "rn")
	if _, errOut, code := p.run("task", "rename", "rn", "--title", "later"); code != 1 || !strings.Contains(errOut, "ended") {
		t.Errorf("rename of an ended task: exit %d, %q", code, errOut)
	}
}
