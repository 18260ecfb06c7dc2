package api

import (
	"fmt"
	"strings"
	"time"
)

// TaskInfo is the task object of `lazy task show --json` (CONTRACT §3).
type TaskInfo struct {
	ID      string `json:"id"`
	ShortID string `json:"short_id"`
	Code    string `json:"code"`
	Ref     string `json:"ref"`
	Title   string `json:"title"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Branch  string `json:"branch"`
	Parent  string `json:"parent"`
	// Turns is the task's work turns that have begun (running or ended);
	// Asks its ask turns, Setup its setup turns: "turns" means work turns
	// everywhere (the CLI's "work turn N", the pages' "Turns", the queue).
	Turns        int       `json:"turns"`
	Asks         int       `json:"asks"`
	Setup        int       `json:"setup"`
	LastActivity time.Time `json:"last_activity"`
	FailReason   string    `json:"fail_reason,omitempty"`
	// Agent is the agent of the task's conversation: "driver: command"
	// ("" before its first turn ended).
	Agent    string `json:"agent,omitempty"`
	Tripwire string `json:"tripwire,omitempty"`
	// ModelError is what is failing in the task's model calls right now
	ModelError string    `json:"model_error,omitempty"`
	Worktree   string    `json:"worktree"`
	CreatedAt  time.Time `json:"created_at"`
	// Usage is what the task's model calls cost (CONTRACT §12); LastTurn
	// what the turn that last called the model cost (number LastTurnNo);
	// BudgetTokens bounds input + output tokens (0: none)
	Usage        *Usage `json:"usage,omitempty"`
	LastTurn     *Usage `json:"last_turn_usage,omitempty"`
	LastTurnNo   int    `json:"last_turn_usage_turn,omitempty"`
	BudgetTokens int64  `json:"budget_tokens"`
	// EndedAt is when the task was accepted or cancelled; EndBase and
	// EndHead what its diff runs between since: for an accepted task the
	// parent's head it was merged onto and the head that went in (the
	// parent's head after the merge), for a cancelled one where its branch
	// left the parent and the head it was left at. "" when not recorded.
	EndedAt *time.Time `json:"ended_at,omitempty"`
	EndBase string     `json:"end_base,omitempty"`
	EndHead string     `json:"end_head,omitempty"`
	// Push, in a cluster, is a push of the task branch to the git remote
	// that failed and is retried until it lands (nil: none waits).
	Push *PushPending `json:"push_pending,omitempty"`
}

// PushPending is a push of the task branch that has not landed yet: since
// when, the commit, the last error, the next try and the tries so far.
type PushPending struct {
	Since     time.Time  `json:"since"`
	Head      string     `json:"head,omitempty"`
	LastError string     `json:"last_error"`
	NextTry   *time.Time `json:"next_try,omitempty"`
	Tries     int        `json:"tries"`
}

// Words is the pending push in one line, relative to now.
func (p *PushPending) Words(now time.Time) string {
	if p == nil {
		return ""
	}
	return PushWords(&p.Since, p.LastError, p.NextTry, now)
}

// PushWords says "pending since …, last error …, next try …".
func PushWords(since *time.Time, lastErr string, next *time.Time, now time.Time) string {
	if since == nil {
		return ""
	}
	s := fmt.Sprintf("pending since %s (%s ago)", since.UTC().Format(time.RFC3339), now.Sub(*since).Round(time.Second))
	if lastErr != "" {
		s += ", last error: " + strings.TrimSpace(lastErr)
	}
	if next != nil {
		if d := next.Sub(now).Round(time.Second); d > 0 {
			s += fmt.Sprintf(", next try in %s", d)
		} else {
			s += ", next try now"
		}
	}
	return s
}

// TaskDetail is a task with its turns and ordinary comments.
type TaskDetail struct {
	Task     TaskInfo     `json:"task"`
	Turns    []Turn       `json:"turns"`
	Comments []Comment    `json:"comments"`
	Commits  []CommitInfo `json:"commits"`
}

// NewTaskArgs are the arguments of taskNew.
type NewTaskArgs struct {
	Prompt string   `json:"prompt"`
	Code   string   `json:"code,omitempty"`
	Role   string   `json:"role,omitempty"`
	Parent string   `json:"parent,omitempty"`
	Scope  []string `json:"scope,omitempty"`
	// BudgetTokens bounds the task's input + output tokens (0: the
	// config's agent.budget_tokens)
	BudgetTokens int64 `json:"budget_tokens,omitempty"`
	// Driver is the task's agent (config.Drivers; "": the
	// config's agent.driver)
	Driver string `json:"driver,omitempty"`
}

// NewTaskResult is the reply of taskNew.
type NewTaskResult struct {
	Task TaskInfo `json:"task"`
	Turn Turn     `json:"turn"`
	// Warnings are what the user should know of the start: uncommitted
	// changes in their checkout, which the task does not start from.
	Warnings []string `json:"warnings,omitempty"`
}

// CommentResult is the reply of comment: the task message, queued; the
// work turn it started (on a blocked task), and Notice: when it reaches
// the agent, in words ("queued: delivered with the next work turn", …).
type CommentResult struct {
	Comment   Comment `json:"comment"`
	Triggered *Turn   `json:"triggered,omitempty"`
	Notice    string  `json:"notice"`
}

// DaemonInfo is daemon.json and the reply of status.
type DaemonInfo struct {
	PID           int       `json:"pid"`
	Root          string    `json:"root"`
	State         string    `json:"state"`
	DashboardPort int       `json:"dashboard_port"`
	ProxyPort     int       `json:"proxy_port"`
	BaseURL       string    `json:"base_url"`
	ProxyURL      string    `json:"proxy_url"`
	StartedAt     time.Time `json:"started_at"`
	Version       string    `json:"version"`
	// Runner is the agent runner in use; Warnings are what the operator
	// must know (agents unsandboxed, or refused for want of a sandbox),
	// printed at start and shown on every dashboard page.
	Runner   string   `json:"runner"`
	Warnings []string `json:"warnings,omitempty"`
	// Sandbox says what a sandboxed agent gets: its user, and the limits
	// in force and how they are enforced (empty: agents run unsandboxed).
	Sandbox string `json:"sandbox,omitempty"`
	// ConfigSource says where the project config in force came from: the
	// approval that let it in through an accept, a commit, or local edits.
	ConfigSource string `json:"config_source,omitempty"`
	// RestartNeeded are changed config keys the running daemon cannot
	// apply (where it listens, its store); ConfigError is why the config
	// file as it is now was not applied. Both are in Warnings too.
	RestartNeeded []string `json:"restart_needed,omitempty"`
	ConfigError   string   `json:"config_error,omitempty"`
}

// Usage is what a task's model calls cost, counted at the proxy from the
// upstream's own replies (CONTRACT §12).
type Usage struct {
	Requests                 int64 `json:"requests"`
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	// ChargedTokens is what the budget counts: input + output tokens, and
	// for a call cut before its reply ended, at least what was held for it
	ChargedTokens int64 `json:"charged_tokens,omitempty"`
}

// BudgetUsed is what counts against a budget (input + output tokens when
// nothing more was charged).
func (u Usage) BudgetUsed() int64 { return max(u.ChargedTokens, u.InputTokens+u.OutputTokens) }

// WatchArgs are the arguments of watch. Tasks nil means every task; an empty
// non-nil list is refused.
type WatchArgs struct {
	Tasks   []string `json:"tasks"`
	Net     bool     `json:"net"`
	NetOnly bool     `json:"net_only"`
	// Transcript adds the running turns' transcript events (the proxy
	// reads the model's replies only while someone asks for them).
	Transcript bool `json:"transcript,omitempty"`
}

// CommitInfo is one commit of a task branch.
type CommitInfo struct {
	SHA     string    `json:"sha"`
	Subject string    `json:"subject"`
	Author  string    `json:"author"`
	Time    time.Time `json:"time"`
}

// CommitDiff is one commit and its diff against its first parent.
type CommitDiff struct {
	CommitInfo
	Files []File `json:"files"`
}

// Turn is one agent turn of a task.
type Turn struct {
	ID     string `json:"id"`
	TaskID string `json:"task_id"`
	Number int    `json:"number"` // the record's number among all the task's turns
	// Seq is the turn's number among its kind (work turn 3, ask 2, setup
	// 1); Label says it so
	Seq     int    `json:"seq"`
	Label   string `json:"label"`
	Kind    string `json:"kind"`
	Trigger string `json:"trigger"` // start | comment | unblock | ask
	// Agent ran the turn ("driver: command"); Notice is what the turn said
	// of its conversation (a new one, and why)
	Agent     string    `json:"agent,omitempty"`
	Notice    string    `json:"notice,omitempty"`
	Prompt    string    `json:"prompt"`
	Status    string    `json:"status"`
	Output    string    `json:"output"`
	Result    string    `json:"result"`
	Error     string    `json:"error"`
	SessionID string    `json:"session_id"`
	ExitCode  int       `json:"exit_code"`
	QueuedAt  time.Time `json:"queued_at"`
	// StartedAt is when the agent process started (nil: it never launched).
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// Transcript is what the model said in the turn, as the proxy read it
	// (the running turn's so far; nil: none kept).
	Transcript *TurnTranscript `json:"transcript,omitempty"`
}

// Comment is a task message: queued, then delivered with a work turn
// (DeliveryState "pending_delivery" or "delivered", DeliveredTurn the work
// turn that carried it), or withdrawn. A message from before task messages
// were queued has no delivery state.
type Comment struct {
	ID            string     `json:"id"`
	TaskID        string     `json:"task_id"`
	Body          string     `json:"body"`
	DeliveryState string     `json:"delivery_state,omitempty"`
	DeliveredTurn int        `json:"delivered_turn,omitempty"`
	WithdrawnAt   *time.Time `json:"withdrawn_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

// PruneArgs are the arguments of taskPrune.
type PruneArgs struct {
	// DryRun says what would go and removes nothing
	DryRun bool `json:"dry_run,omitempty"`
	// KeepBranches, a duration, replaces tasks.keep_branches for this
	// prune ("0s": every ended task's branch goes now)
	KeepBranches string `json:"keep_branches,omitempty"`
}

// PruneResult is what a prune removed (or, dry, would remove), one entry
// per ended task it touched, and the branches it keeps for now.
type PruneResult struct {
	DryRun       bool         `json:"dry_run"`
	KeepBranches string       `json:"keep_branches"`
	Pruned       []PrunedTask `json:"pruned"`
	Kept         []PrunedTask `json:"kept"`
}

// PrunedTask is one ended task's clean-up. Worktree is the worktree
// removed; Branch the branch deleted, its commits kept at KeptRef; in Kept,
// BranchUntil is when its branch goes.
type PrunedTask struct {
	Task        string     `json:"task"`
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Worktree    string     `json:"worktree,omitempty"`
	Branch      string     `json:"branch,omitempty"`
	KeptRef     string     `json:"kept_ref,omitempty"`
	BranchUntil *time.Time `json:"branch_until,omitempty"`
	// Error is why this task's clean-up stopped (the rest went on)
	Error string `json:"error,omitempty"`
}
