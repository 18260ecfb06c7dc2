package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/agent"
	"lazy/gitx"
	"lazy/internal/safefs"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

func runSync(ctx context.Context, t gitx.TaskRepo) jobResult {
	if on, err := t.MergeInProgress(); err != nil {
		return jobResult{err: err}
	} else if on {
		return jobResult{err: &review.RuleError{Reason: "A merge is already half-finished in the task's worktree; unblock the agent to resolve it first."}}
	}
	err := t.Merge(ctx, fmt.Sprintf("Merge %s into %s", t.Parent, t.Branch))
	var ce *gitx.ConflictError
	if errors.As(err, &ce) {
		return jobResult{synced: &SyncDone{Status: string(task.Conflict), Conflicts: ce.Files}}
	}
	if err != nil {
		return jobResult{err: err}
	}
	return jobResult{synced: &SyncDone{Status: string(task.Blocked)}}
}

func scopeOf(t *store.Task) []string {
	var scope []string
	if t.Scope != "" {
		_ = json.Unmarshal([]byte(t.Scope), &scope)
	}
	return scope
}

// outOfScope lists changed paths outside the task's scope not yet allowed,
// and the protected paths whose approval still holds: one that approved
// the content the path has at rev (an approval pins a blob; other content
// needs a new one).
func outOfScope(ctx context.Context, deps *TaskDeps, t *store.Task, rev string, changed []string) ([]string, map[string]bool, error) {
	as, err := deps.Store.ListApprovals(ctx, t.ID)
	if err != nil {
		return nil, nil, err
	}
	allowed, pinned := map[string]bool{}, map[string]string{}
	for _, ap := range as {
		if ap.Kind == store.ApprovalScope {
			allowed[ap.Path] = true
		} else if ap.Blob != "" {
			pinned[ap.Path] = ap.Blob
		}
	}
	approved := map[string]bool{}
	if len(pinned) > 0 {
		var paths []string
		for p := range pinned {
			paths = append(paths, p)
		}
		now, err := gitx.Blobs(ctx, deps.Root, rev, paths)
		if err != nil {
			return nil, nil, err
		}
		for p, b := range pinned {
			approved[p] = now[p] == b
		}
	}
	return review.OutOfScope(scopeOf(t), changed, allowed), approved, nil
}

// approveAt records a protected-path approval of each file's content at rev.
func approveAt(ctx context.Context, deps *TaskDeps, taskID, rev string, files []string, at time.Time) error {
	blobs, err := gitx.Blobs(ctx, deps.Root, rev, files)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := deps.Store.AddApproval(ctx, &store.Approval{TaskID: taskID, Path: f, Kind: store.ApprovalProtected, ApprovedAt: at, Blob: blobs[f]}); err != nil {
			return err
		}
	}
	return nil
}

// AcceptBlockers are the changed paths an accept would refuse today: out of
// the task's scope and not allowed, and protected without an approval of
// their content now.
func AcceptBlockers(ctx context.Context, deps *TaskDeps, t *store.Task, changed []string) (outScope, needApproval []string, err error) {
	oos, approved, err := outOfScope(ctx, deps, t, t.Branch, changed)
	if err != nil {
		return nil, nil, err
	}
	return oos, review.NeedApproval(deps.ProtectPaths(), changed, approved), nil
}

// runAccept checks, in order: the head reviewed, queued comments, no
// commits, a half-finished merge, out-of-scope files, protected files without
// approval, the user's checkout; then combines the task with its parent by
// the method (a conflict refuses it) and moves the parent there. A task
// behind its parent is no refusal: merge and squash take the parent's new
// commits in as they merge, rebase replays the task onto them.
func runAccept(ctx context.Context, deps *TaskDeps, t *store.Task, args Accept) jobResult {
	if deps.Remote == "" {
		return acceptHere(ctx, deps, t, args)
	}
	// what is accepted is on the remote first: the task branch, whose
	// push may be pending since an earlier job
	pushed := pushBranch(ctx, deps.Root, deps.Remote, t.Branch)
	if pushed.err != nil {
		return jobResult{push: pushed, err: &BusyError{What: fmt.Sprintf("the push of the task branch to the cluster's git remote, which failed: %v; the accept waits for it: accept again once `lazy task show` no longer says push pending", pushed.err)}}
	}
	r := acceptHere(ctx, deps, t, args)
	r.push = pushed
	return r
}

// acceptHere is runAccept once the task branch is where it must be.
func acceptHere(ctx context.Context, deps *TaskDeps, t *store.Task, args Accept) jobResult {
	refuse := func(cause string, files []string) jobResult {
		return jobResult{err: review.Refuse(cause, t.Ref(), t.Parent, args.Reason, files)}
	}
	root := deps.Root
	// the decision binds to what the reviewer saw: the head, and no
	// comment of theirs left undelivered
	head, err := gitx.RevParse(ctx, root, t.Branch)
	if err != nil {
		return jobResult{err: err}
	}
	if args.Head != "" {
		if err := review.CheckHead(args.Head); err != nil {
			return jobResult{err: err}
		}
		seen, err := gitx.RevParse(ctx, root, args.Head+"^{commit}")
		if err != nil || seen != head {
			if err != nil {
				seen = args.Head
			}
			commits, _ := gitx.CommitsSince(ctx, root, seen, head)
			return jobResult{err: review.HeadMoved(t.Ref(), seen, head, args.Reason, commits)}
		}
	}
	comments, err := deps.Store.ListReviewComments(ctx, t.ID)
	if err != nil {
		return jobResult{err: err}
	}
	if q := review.Queued(comments); len(q) > 0 {
		ids := make([]string, len(q))
		for i := range q {
			ids[i] = q[i].ID
		}
		return refuse(review.ReasonCommentsQueued, ids)
	}
	method := args.Method
	if method == "" {
		method = gitx.MethodMerge
	}
	if !gitx.ValidMethod(method) {
		return jobResult{err: &review.RuleError{Reason: fmt.Sprintf("merge method %q is not one of %s", method, strings.Join(gitx.Methods, ", "))}}
	}
	ahead, _, err := gitx.AheadBehind(ctx, root, t.Parent, head)
	if err != nil {
		return jobResult{err: err}
	}
	if ahead == 0 {
		return refuse(review.ReasonNoCommits, nil)
	}
	if on, err := taskRepoOf(deps, t).MergeInProgress(); err != nil {
		return jobResult{err: err}
	} else if on {
		return refuse(review.ReasonMergeInProgress, nil)
	}
	changed, err := gitx.ChangedPaths(ctx, root, t.Parent, head)
	if err != nil {
		return jobResult{err: err}
	}
	oos, approved, err := outOfScope(ctx, deps, t, head, changed)
	if err != nil {
		return jobResult{err: err}
	}
	if len(oos) > 0 && args.AllowOutOfScope {
		for _, f := range oos {
			if err := deps.Store.AddApproval(ctx, &store.Approval{TaskID: t.ID, Path: f, Kind: store.ApprovalScope, ApprovedAt: nowUTC()}); err != nil {
				return jobResult{err: err}
			}
		}
		oos = nil
	}
	if len(oos) > 0 {
		return refuse(review.ReasonOutOfScope, oos)
	}
	need := review.NeedApproval(deps.ProtectPaths(), changed, approved)
	if len(need) > 0 {
		if args.Passphrase == "" {
			return refuse(review.ReasonPassphraseRequired, need)
		}
		if err := deps.CheckPassphrase(t.ID, args.Passphrase); err != nil {
			r := review.Refuse(review.ReasonPassphraseRequired, t.Ref(), t.Parent, args.Reason, need)
			r.Message, r.Cause = err.Error(), err
			return jobResult{err: r}
		}
		if err := approveAt(ctx, deps, t.ID, head, need, nowUTC()); err != nil {
			return jobResult{err: err}
		}
	}
	// the user's own checkout of the parent: a fast-forward there must not
	// meet uncommitted changes to what the task changed
	if dir, dirty, err := gitx.DirtyCheckout(ctx, root, t.Parent, changed); err != nil {
		return jobResult{err: err}
	} else if len(dirty) > 0 {
		return jobResult{err: review.CheckoutDirty(t.Ref(), t.Parent, dir, args.Reason, dirty)}
	}
	// what goes in is kept on the task: its page shows it once the branch
	// and the parent have moved on
	base, err := gitx.RevParse(ctx, root, t.Parent)
	if err != nil {
		return jobResult{err: err}
	}
	// the commit the parent moves to: exactly the head checked above (a
	// fast-forward), or made from it by the method; nothing moves the
	// project's task ref but this daemon's jobs, and this is one
	next, err := gitx.Combine(ctx, root, base, head, method, acceptMessage(t, method, args.Reason))
	var ce *gitx.ConflictError
	var rc *gitx.RebaseConflictError
	switch {
	case errors.As(err, &ce):
		return jobResult{err: review.MergeConflict(t.Ref(), t.Parent, ce.Files)}
	case errors.As(err, &rc):
		// merge or squash take the change whole: offer them only when
		// the whole change merges; otherwise the next step is a sync
		if m, derr := gitx.DryMerge(ctx, root, base, head); derr == nil && !m.Clean {
			return jobResult{err: review.MergeConflict(t.Ref(), t.Parent, m.Conflicts)}
		}
		return jobResult{err: review.RebaseConflict(t.Ref(), t.Parent, rc.Commit, args.Reason, rc.Files)}
	case err != nil:
		return jobResult{err: err}
	}
	if deps.Remote != "" {
		// the remote's parent moves first, and only as a fast-forward: when
		// it moved on meanwhile, the accept is refused and nothing changed
		if err := gitx.PublishCommit(ctx, root, deps.Remote, next, t.Parent); err != nil {
			r := review.Refuse(review.ReasonBehindParent, t.Ref(), t.Parent, args.Reason, nil)
			r.Message = fmt.Sprintf("%s moved on the cluster's git remote meanwhile (%v): sync the task with it, then accept again", t.Parent, err)
			return jobResult{err: r}
		}
	}
	if err := gitx.FastForward(ctx, root, t.Parent, next); err != nil {
		return jobResult{err: err}
	}
	// the record is what went into the parent: base..next
	return jobResult{merged: true, base: base, head: next}
}

// acceptMessage is the message of the commit an accept makes on the parent
// (a merge commit, a squash): the task's title and the reviewer's reason.
func acceptMessage(t *store.Task, method, reason string) string {
	title := strings.TrimSpace(strings.SplitN(t.Title, "\n", 2)[0])
	if title == "" {
		title = "task " + t.Ref()
	}
	subject := title
	if method == gitx.MethodMerge {
		subject = fmt.Sprintf("Merge %s into %s: %s", t.Branch, t.Parent, title)
	}
	return fmt.Sprintf("%s\n\n%s\n\nAccepted task %s (%s): %s\n", subject, strings.TrimSpace(reason), t.Ref(), t.Branch, method)
}

// runDecide records "allow" or reverts the files on the task branch.
func runDecide(ctx context.Context, deps *TaskDeps, t *store.Task, args ViolationDecision) jobResult {
	if len(args.Files) == 0 {
		return jobResult{err: &review.RuleError{Reason: "name the out-of-scope files the decision is about"}}
	}
	changed, err := gitx.ChangedPaths(ctx, deps.Root, t.Parent, t.Branch)
	if err != nil {
		return jobResult{err: err}
	}
	oos, _, err := outOfScope(ctx, deps, t, t.Branch, changed)
	if err != nil {
		return jobResult{err: err}
	}
	isOOS := map[string]bool{}
	for _, f := range oos {
		isOOS[f] = true
	}
	for _, f := range args.Files {
		if !isOOS[f] {
			return jobResult{err: &review.RuleError{Reason: fmt.Sprintf("%s is not an undecided out-of-scope change of this task", f)}}
		}
	}
	switch args.Decision {
	case "allow":
		for _, f := range args.Files {
			if err := deps.Store.AddApproval(ctx, &store.Approval{TaskID: t.ID, Path: f, Kind: store.ApprovalScope, ApprovedAt: nowUTC()}); err != nil {
				return jobResult{err: err}
			}
		}
	case "revert":
		if err := taskRepoOf(deps, t).RevertPaths(ctx, args.Files, "Revert out-of-scope changes"); err != nil {
			return jobResult{err: err}
		}
	default:
		return jobResult{err: &review.RuleError{Reason: fmt.Sprintf("decision %q is neither allow nor revert", args.Decision)}}
	}
	return jobResult{}
}

// gitReply is a git job's reply before its kind adds to it: done, or the
// error (a refusal by the rules is no failure of the actor).
func (a *TaskActor) gitReply(r jobResult) any {
	if r.err == nil {
		return &Done{}
	}
	if !isRefusal(r.err) {
		a.lastErr = r.err.Error()
	}
	return r.err
}

// finishSync records what a sync did on the task's status.
func (a *TaskActor) finishSync(r jobResult) any {
	reply := a.gitReply(r)
	if sd := r.synced; r.err == nil && sd != nil {
		reply = sd
		if sd.Status == string(task.Conflict) {
			a.setStatus(task.Conflict, fmt.Sprintf("syncing with %s hit conflicts in %v; ask the agent about them or unblock it to resolve them", a.task.Parent, sd.Conflicts))
		} else if a.task.Status == task.Conflict || a.task.Status == task.Blocked {
			a.setStatus(task.Blocked, "")
		}
	}
	return reply
}

// finishAccept ends a task whose branch was merged; ended: the actor stops
// once its waiter is answered.
func (a *TaskActor) finishAccept(r jobResult) (reply any, ended bool) {
	reply = a.gitReply(r)
	if r.err != nil || !r.merged {
		return reply, false
	}
	a.task.EndBase, a.task.EndHead = r.base, r.head
	if err := a.endTask(task.Accepted); err != nil {
		return err, false
	}
	a.removeRepo()
	return &AcceptDone{Task: *a.task}, true
}

// answer sends a job's reply to its waiter, when it has one.
func (a *TaskActor) answer(ctx actor.Context, j *job, reply any) {
	if j.sender != nil {
		ctx.Send(j.sender, reply)
	}
}

func nowUTC() time.Time { return time.Now().UTC() }

// isRefusal reports an answer by the review rules (a refused accept, a rule
// verdict, a wrong passphrase): the actor did its job, nothing failed, so it
// is no "last failure" in actor health.
func isRefusal(err error) bool {
	var ref *review.Refusal
	var rule *review.RuleError
	return errors.As(err, &ref) || errors.As(err, &rule)
}

// travel is a job's trip through the cluster: the git remote carries the
// task's branch, the shared store its agent home (the sessions the next
// turn resumes). What a job needs comes before it runs; what it changed
// goes after.
type travel struct {
	log                            *slog.Logger
	root, remote, worktree, branch string
	parent, taskID, home           string
	kind                           jobKind
	homes                          HomeStore
	// fresh, in a cluster, says whether the task's lease is still this
	// member's: nothing is sent to the remote or the store once it may not be
	fresh func() error
}

// HomeStore keeps tasks' agent homes (store.SQL does).
type HomeStore interface {
	SaveAgentHome(ctx context.Context, taskID string, archive []byte, at time.Time) error
	AgentHome(ctx context.Context, taskID string) ([]byte, time.Time, error)
}

// trip is the job's travel; nil outside a cluster.
func (a *TaskActor) trip(j *job) *travel {
	if a.deps.Remote == "" || a.task == nil || j.kind() == jobPush || j.kind() == jobHome {
		return nil
	}
	t := a.task
	tr := &travel{log: a.log, root: a.deps.Root, remote: a.deps.Remote, worktree: t.Worktree, branch: t.Branch, parent: t.Parent,
		kind: j.kind(), taskID: t.ID, homes: a.deps.Homes, fresh: a.leaseFresh()}
	if a.deps.HomeFor != nil {
		tr.home = a.deps.HomeFor(t.Ref())
	}
	return tr
}

func (tr *travel) arrive(ctx context.Context) error {
	if err := gitx.Arrive(ctx, tr.root, tr.remote, tr.worktree, tr.branch, tr.parent); err != nil {
		return fmt.Errorf("bring the task from the cluster's git remote: %w", err)
	}
	if tr.agentTurn() {
		return tr.bringHome(ctx)
	}
	return nil
}

// homeWait bounds how long a job's arrival waits for the store to give it
// the agent home.
const homeWait = 30 * time.Second

// homeFromStore reads the task's agent home from the store. The store may
// have stopped answering just as the job started: the read is tried again
// each second for up to homeWait (or until the job is stopped, as on a
// lost lease) before the turn fails for it.
func (tr *travel) homeFromStore(ctx context.Context) ([]byte, time.Time, error) {
	give := time.Now().Add(homeWait)
	for {
		archive, at, err := tr.homes.AgentHome(ctx, tr.taskID)
		if err == nil || errors.Is(err, store.ErrNotFound) || time.Now().After(give) || ctx.Err() != nil {
			return archive, at, err
		}
		tr.log.Warn("bring the agent home from the store (trying again)", "err", err)
		select {
		case <-ctx.Done():
			return nil, time.Time{}, err
		case <-time.After(time.Second):
		}
	}
}

func (tr *travel) agentTurn() bool {
	return tr.homes != nil && tr.home != "" && tr.kind.agentTurn()
}

// homeMark records, in the home, which archive it is; homeCwd the worktree
// its agent ran in (claude keys its sessions by it). The daemon writes both,
// but they sit in the agent's home: the agent may have replaced either by a
// link, a pipe or a huge file, so they are read and written beneath the home
// without following links (safefs), and read bounded.
const (
	homeMark = ".lazy-home-at"
	homeCwd  = ".lazy-home-cwd"
	// maxMark bounds a marker as read: a time, or a path
	maxMark = 4096
)

// parseHomeCwd reads the worktree recorded in a home's homeCwd marker: an
// absolute, clean path with no control character, or an error.
func parseHomeCwd(b []byte) (string, error) {
	p := string(b)
	if len(p) == 0 || len(p) > maxMark || !filepath.IsAbs(p) || filepath.Clean(p) != p || !utf8.ValidString(p) ||
		strings.ContainsFunc(p, unicode.IsControl) {
		return "", fmt.Errorf("the agent home's %s is not a worktree path (%d bytes)", homeCwd, len(b))
	}
	return p, nil
}

// bringHome replaces this member's copy of the agent home by the store's
// when the store's is newer (the task last ran elsewhere).
func (tr *travel) bringHome(ctx context.Context) error {
	archive, at, err := tr.homeFromStore(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil // no turn has kept one yet
	}
	if err != nil {
		return fmt.Errorf("bring the agent home from the store: %w", err)
	}
	mark := at.UTC().Format(time.RFC3339Nano)
	if b, err := readMark(tr.home, homeMark); err == nil && string(b) == mark {
		return nil // this member made it, or brought it already
	}
	if err := agent.RestoreHome(tr.home, archive); err != nil {
		return fmt.Errorf("bring the agent home from the store: %w", err)
	}
	if b, err := readMark(tr.home, homeCwd); err == nil {
		old, err := parseHomeCwd(b)
		if err != nil {
			return fmt.Errorf("bring the agent home from the store: %w", err)
		}
		if err := agent.MoveSessions(tr.home, old, tr.worktree); err != nil {
			return fmt.Errorf("re-key the agent's sessions to this member's worktree: %w", err)
		}
	}
	return writeMarks(tr.home, map[string]string{homeMark: mark})
}

// readMark reads marker name of the home at dir, beneath it, bounded.
func readMark(dir, name string) ([]byte, error) {
	root, err := safefs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.ReadFile(name, maxMark)
}

// writeMarks writes markers into the home at dir, each replacing whatever
// the agent left at its name (a link is replaced, never followed).
func writeMarks(dir string, marks map[string]string) error {
	root, err := safefs.Open(dir)
	if err != nil {
		return fmt.Errorf("mark the agent home: %w", err)
	}
	defer root.Close()
	for name, body := range marks {
		if err := root.WriteFile(name, []byte(body), 0o600); err != nil {
			return fmt.Errorf("mark the agent home: %w", err)
		}
	}
	return nil
}

// depart sends the branch after a job that may have changed it (an accept
// has published the parent itself) and, after an agent turn, the agent
// home. It returns what the push did: a failed push is the actor's to
// retry (task_push.go); a failure to keep the home is logged. A member
// whose lease on the task may have run out (fresh fails) sends nothing:
// its work stays here, and no retry is tried.
func (tr *travel) depart(ctx context.Context) (p pushTry) {
	if tr.fresh != nil {
		if err := tr.fresh(); err != nil {
			tr.log.Error("the job's work stays on this member", "err", err)
			return p
		}
	}
	if tr.kind.changesBranch() {
		p = pushBranch(ctx, tr.root, tr.remote, tr.branch)
	}
	if tr.agentTurn() {
		tr.keepHome(ctx)
	}
	return p
}

// keepHome packs the agent home and keeps it in the store (a failure is
// logged).
func (tr *travel) keepHome(ctx context.Context) {
	if fi, err := os.Lstat(tr.home); err != nil || !fi.IsDir() {
		return // the agent never started
	}
	// the mark of the archive the store has now, put back should this
	// save fail (below)
	prev, prevErr := readMark(tr.home, homeMark)
	at := time.Now().UTC().Truncate(time.Microsecond) // what the store keeps
	err := writeMarks(tr.home, map[string]string{homeMark: at.Format(time.RFC3339Nano), homeCwd: tr.worktree})
	var archive []byte
	if err == nil {
		archive, err = agent.ArchiveHome(tr.home)
	}
	if err == nil {
		err = tr.homes.SaveAgentHome(ctx, tr.taskID, archive, at)
	}
	if err != nil {
		tr.log.Error("keep the agent home in the store", "err", err)
		// the store still has the archive before this turn (a store
		// outage): the home here, newer, keeps that archive's mark, so the
		// next job here keeps it rather than bring the older one back
		if prevErr == nil {
			if merr := writeMarks(tr.home, map[string]string{homeMark: string(prev)}); merr != nil {
				tr.log.Error("put back the agent home's mark", "err", merr)
			}
		}
	}
}
