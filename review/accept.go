package review

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"lazy/errkind"
)

// Refusal causes of an accept (CONTRACT §8).
const (
	ReasonPassphraseRequired = "passphrase_required"
	ReasonOutOfScope         = "out_of_scope"
	ReasonBehindParent       = "behind_parent"
	ReasonMergeInProgress    = "merge_in_progress"
	ReasonNoCommits          = "no_commits"
	ReasonHeadMoved          = "head_moved"
	ReasonCommentsQueued     = "comments_queued"
	ReasonCheckoutDirty      = "checkout_dirty"
	// ReasonMergeConflict: the task does not merge cleanly into its parent
	// (merge or squash); a sync brings the conflicts to the agent
	ReasonMergeConflict = "merge_conflict"
	// ReasonRebaseConflict: replaying the task's commits onto the parent
	// stops on conflicts (rebase)
	ReasonRebaseConflict = "rebase_conflict"
)

// In-page actions a remedy can offer.
const (
	ActionPassphrase = "passphrase"
	ActionSync       = "sync"
	ActionReview     = "review"  // reload the page and review the new commits
	ActionUnblock    = "unblock" // deliver the queued comments
)

// Remedy is what to do about a refused accept. It travels in the RPC error
// body next to the message and is parsed client-side.
type Remedy struct {
	Reason   string   `json:"reason"`
	Next     string   `json:"next"`
	Command  string   `json:"command,omitempty"`
	UIAction string   `json:"uiAction,omitempty"`
	Files    []string `json:"files,omitempty"`
	// Commits are the commits made since the head the reviewer saw
	// (head_moved), newest first, "<short sha> <subject>".
	Commits []string `json:"commits,omitempty"`
}

var knownReasons = map[string]bool{ReasonPassphraseRequired: true, ReasonOutOfScope: true, ReasonBehindParent: true, ReasonMergeInProgress: true,
	ReasonNoCommits: true, ReasonHeadMoved: true, ReasonCommentsQueued: true, ReasonCheckoutDirty: true, ReasonMergeConflict: true, ReasonRebaseConflict: true}

// Usable reports whether a remedy should be shown: a known reason and a
// non-blank next step. Anything else degrades to no remedy (no panel).
func (r *Remedy) Usable() bool {
	return r != nil && knownReasons[r.Reason] && strings.TrimSpace(r.Next) != ""
}

// ParseRemedy reads a remedy from an error body; an unusable one is nil.
func ParseRemedy(raw []byte) *Remedy {
	if len(raw) == 0 {
		return nil
	}
	var r Remedy
	if json.Unmarshal(raw, &r) != nil || !r.Usable() {
		return nil
	}
	return &r
}

// Refusal is a refused accept: the daemon's message and its remedy.
type Refusal struct {
	Message string
	Remedy  *Remedy
	// Cause is what refused it, when that is an error of its own (a wrong
	// passphrase, guessing that must wait); the web layer answers by it
	Cause error
}

func (r *Refusal) Error() string { return r.Message }

// Unwrap is the refusal's cause.
func (r *Refusal) Unwrap() error { return r.Cause }

// ErrorKind is errkind.Refusal, or the passphrase gate's own kind when that
// refused it (a wrong passphrase, guessing that must wait): the web answers
// those as the gate does.
func (r *Refusal) ErrorKind() errkind.Kind {
	if k := errkind.Of(r.Cause); k == errkind.WrongPassphrase || k == errkind.Wait {
		return k
	}
	return errkind.Refusal
}

// RemedyBody is the remedy for the RPC error body.
func (r *Refusal) RemedyBody() any {
	if r.Remedy == nil {
		return nil
	}
	return r.Remedy
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func acceptCommand(ref, reason string, approve []string) string {
	parts := []string{"lazy", "accept", ShellQuote(ref), "--reason", ShellQuote(reason)}
	for _, f := range approve {
		parts = append(parts, "--approve-file", ShellQuote(f))
	}
	return strings.Join(parts, " ")
}

// Refuse builds the refusal for a cause: the message shown verbatim and the
// remedy with its exact, copy-pasteable command.
func Refuse(cause, ref, parent, reason string, files []string) *Refusal {
	if strings.TrimSpace(reason) == "" {
		reason = "reviewed"
	}
	q := ShellQuote(ref)
	switch cause {
	case ReasonNoCommits:
		return &Refusal{Message: fmt.Sprintf("Task %s has no commits on its branch; there is nothing to merge.", ref),
			Remedy: &Remedy{Reason: cause, Next: "Unblock the task and ask the agent to commit its work, then accept again.", Command: "lazy unblock " + q + " -m " + ShellQuote("Commit your changes.")}}
	case ReasonMergeInProgress:
		return &Refusal{Message: fmt.Sprintf("Task %s has a half-finished merge in its worktree.", ref),
			Remedy: &Remedy{Reason: cause, Next: "Finish the merge: ask the agent to resolve the conflicts and commit (unblock), then accept again.", Command: "lazy unblock " + q + " -m " + ShellQuote("Resolve the merge conflicts and commit the merge.")}}
	case ReasonBehindParent:
		return &Refusal{Message: fmt.Sprintf("Task %s is behind its parent branch %s.", ref, parent),
			Remedy: &Remedy{Reason: cause, Next: fmt.Sprintf("Sync with %s (merge it into the task branch), then accept again.", parent), Command: "lazy sync " + q, UIAction: ActionSync}}
	case ReasonOutOfScope:
		return &Refusal{Message: fmt.Sprintf("Task %s changed files outside its scope: %s.", ref, strings.Join(files, ", ")),
			Remedy: &Remedy{Reason: cause, Next: "Decide on the out-of-scope files: allow them, or revert them on the task branch; then accept again.", Command: "lazy accept " + q + " --reason " + ShellQuote(reason) + " --allow-out-of-scope", Files: files}}
	case ReasonPassphraseRequired:
		return &Refusal{Message: fmt.Sprintf("Task %s changed protected files: %s. Accepting needs the approval passphrase.", ref, strings.Join(files, ", ")),
			Remedy: &Remedy{Reason: cause, Next: "Enter the approval passphrase to approve these files and accept.", Command: acceptCommand(ref, reason, files), UIAction: ActionPassphrase, Files: files}}
	case ReasonCommentsQueued:
		return &Refusal{Message: fmt.Sprintf("Task %s has %d comment(s) queued for the agent that it has not seen; accepting would drop them.", ref, len(files)),
			Remedy: &Remedy{Reason: cause, Next: "Deliver them with an unblock (the agent works on them), or withdraw them; then accept again.", Command: "lazy unblock " + q, UIAction: ActionUnblock}}
	}
	return &Refusal{Message: cause}
}

// CheckoutDirty is the refusal of an accept whose parent is checked out at
// dir with uncommitted changes to files the task changed.
func CheckoutDirty(ref, parent, dir, reason string, files []string) *Refusal {
	return &Refusal{Message: fmt.Sprintf("Your checkout of %s at %s has uncommitted changes to files task %s changed: %s. Nothing was merged.", parent, dir, ref, strings.Join(files, ", ")),
		Remedy: &Remedy{Reason: ReasonCheckoutDirty, Next: fmt.Sprintf("Commit or stash the local changes in %s (git -C %s stash), then accept again.", dir, ShellQuote(dir)),
			Command: "lazy accept " + ShellQuote(ref) + " --reason " + ShellQuote(reason), Files: files}}
}

// MergeConflict is the refusal of an accept whose task does not merge
// cleanly into its parent: a sync puts the task in conflict, and the agent
// resolves the conflicts when it is unblocked.
func MergeConflict(ref, parent string, files []string) *Refusal {
	return &Refusal{Message: fmt.Sprintf("Task %s does not merge cleanly into %s: conflicts in %s. Nothing was merged.", ref, parent, strings.Join(files, ", ")),
		Remedy: &Remedy{Reason: ReasonMergeConflict, Next: fmt.Sprintf("Sync with %s: the task goes into conflict, and the agent resolves the conflicts when you unblock it; then accept again.", parent),
			Command: "lazy sync " + ShellQuote(ref), UIAction: ActionSync, Files: files}}
}

// RebaseConflict is the refusal of a rebase accept whose replay of the
// task's commits onto the parent stops on conflicts at commit.
func RebaseConflict(ref, parent, commit, reason string, files []string) *Refusal {
	return &Refusal{Message: fmt.Sprintf("Replaying task %s's commits onto %s stops on conflicts at commit %s in %s. Nothing was merged.", ref, parent, short(commit), strings.Join(files, ", ")),
		Remedy: &Remedy{Reason: ReasonRebaseConflict, Next: "Accept with the merge or squash method instead (they take the change as a whole), or sync and let the agent resolve the conflicts, then accept again.",
			Command: "lazy accept " + ShellQuote(ref) + " --reason " + ShellQuote(orReviewed(reason)) + " --method merge", Files: files}}
}

func orReviewed(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return "reviewed"
	}
	return reason
}

// SyncConflicts is what a sync that hit conflicts tells the reviewer: the
// files, and that the next step is an unblock (the agent resolves them).
func SyncConflicts(ref string, files []string) string {
	return fmt.Sprintf("conflicts in %s: unblock the task: the agent resolves them (lazy unblock %s)", strings.Join(files, ", "), ShellQuote(ref))
}

// headID is a commit's id, or a prefix of one of at least 7 hex digits.
var headID = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// CheckHead refuses a head to accept that is not a commit id: a name
// ("main", "HEAD", "lazy/x") would resolve to whatever it is now, a head
// nobody reviewed.
func CheckHead(head string) error {
	if !headID.MatchString(head) {
		return &RuleError{Reason: fmt.Sprintf("the head to accept must be a commit id (the one the page showed or `lazy accept` printed), not %q", head)}
	}
	return nil
}

// HeadMoved is the refusal of an accept whose reviewer saw head seen while
// the branch is at now: commits lists what was committed since (nil when
// the branch was rewritten rather than added to).
func HeadMoved(ref, seen, now, reason string, commits []string) *Refusal {
	msg := fmt.Sprintf("The branch of task %s moved since you reviewed it (you saw %s, it is at %s): nothing was merged.", ref, short(seen), short(now))
	if len(commits) == 0 {
		msg = fmt.Sprintf("The branch of task %s was rewritten since you reviewed it (you saw %s, it is at %s): nothing was merged.", ref, short(seen), short(now))
	}
	return &Refusal{Message: msg, Remedy: &Remedy{Reason: ReasonHeadMoved, Next: "Reload and review the new commits, then accept what you reviewed.",
		Command: "lazy accept " + ShellQuote(ref) + " --head " + short(now) + " --reason " + ShellQuote(orReviewed(reason)), UIAction: ActionReview, Commits: commits}}
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
