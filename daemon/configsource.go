package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"lazy/config"
	"lazy/gitx"
	"lazy/store"
	"lazy/task"
)

// configSource says where the project's config in force came from
// (CONTRACT §14): the approval with the passphrase that let it in through
// an accept, the commit that holds it, or edits of the user's own. The
// config is protected by default, so content that arrived with an accept is
// content a human approved; this names that approval.
func (d *Daemon) configSource(ctx context.Context) string {
	path := filepath.Join(d.paths.Root, config.FileName)
	if _, err := os.Lstat(path); err != nil {
		return "config: none in " + config.FileName + " (the defaults)"
	}
	blob, err := gitx.Run(ctx, d.paths.Root, "hash-object", "--no-filters", "--", path)
	if err != nil {
		return ""
	}
	if ap, t := d.approvalOf(ctx, config.FileName, blob); ap != nil {
		return fmt.Sprintf("config: %s as approved with the passphrase for task %s on %s (accepted into %s)",
			config.FileName, t.Ref(), ap.ApprovedAt.UTC().Format("2006-01-02 15:04 MST"), t.Parent)
	}
	if committed, err := gitx.Run(ctx, d.paths.Root, "rev-parse", "-q", "--verify", "HEAD:"+config.FileName); err == nil && committed == blob {
		last, _ := gitx.Run(ctx, d.paths.Root, "log", "-1", "--no-decorate", "--format=%h %s", "--", config.FileName)
		return fmt.Sprintf("config: %s as committed (%s); no task brought it", config.FileName, strings.TrimSpace(last))
	}
	return fmt.Sprintf("config: %s has edits of your own, not committed and not from a task", config.FileName)
}

// approvalOf finds the passphrase approval of path with content blob among
// the accepted tasks, newest first.
func (d *Daemon) approvalOf(ctx context.Context, path, blob string) (*store.Approval, *store.Task) {
	tasks, err := d.st.ListTasks(ctx)
	if err != nil {
		return nil, nil
	}
	var best *store.Approval
	var owner *store.Task
	for i := range tasks {
		t := &tasks[i]
		if t.Status != task.Accepted {
			continue
		}
		aps, err := d.st.ListApprovals(ctx, t.ID)
		if err != nil {
			continue
		}
		for j := range aps {
			a := &aps[j]
			if a.Kind == store.ApprovalProtected && a.Path == path && a.Blob == blob && (best == nil || a.ApprovedAt.After(best.ApprovedAt)) {
				best, owner = a, t
			}
		}
	}
	return best, owner
}

// setConfigSource records where the config in force came from.
func (d *Daemon) setConfigSource(ctx context.Context) {
	d.status.setConfigSource(d.configSource(ctx))
}
