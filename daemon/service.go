package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"lazy/actors"
	"lazy/api"
	"lazy/config"
	"lazy/gitx"
	"lazy/proxy"
	"lazy/review"
	"lazy/store"
	"lazy/supervisor"
	"lazy/task"
)

// Service is the daemon's task operations, as the RPC and the pages call them.
type Service struct {
	live *liveConfig
	// transcripts is each running turn's transcript (transcript.go)
	transcripts *transcripts
	paths       api.Paths
	st          store.Store
	sup         *supervisor.Supervisor
	creds       *credentials
	// trouble is each task's failing model calls, right now
	trouble *trouble

	// idents indexes every task's id and code, which never change, so that
	// resolving a ref loads one row instead of every task.
	mu     sync.Mutex
	idents []task.Ident
	// createMu makes task creations one at a time
	createMu sync.Mutex
	// usage counts each task's model calls and holds its budget
	usage *usageBook
	// remote is the cluster's git remote ("" for a single daemon); fetched
	// is when this member last fetched from it
	remote  string
	log     *slog.Logger
	fetchMu sync.Mutex
	fetched map[string]*following // by task (cluster.go)
	// logs are task branches' commit lists by the commits they run between
	logs logCache
	// links is the TLS of the links to the other members and to etcd, as
	// started (nil: plaintext)
	links *supervisor.LinkTLS
	// runnerReady says whether agent turns can run here now (the runner
	// probed again when it could not); nil: not checked
	runnerReady func() error
}

// UsageError is a request that cannot be served as given (4xx).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

// Resolve finds the task ref names (CONTRACT §2).
func (s *Service) Resolve(ctx context.Context, ref string) (*store.Task, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, usage("no task given: name a task by its code, short id or full id (see `lazy task list`)")
	}
	id, err := s.resolveIdent(ctx, ref, false)
	var nf *task.NotFoundError
	if errors.As(err, &nf) {
		id, err = s.resolveIdent(ctx, ref, true) // a task made since the index was read
	}
	if errors.As(err, &nf) {
		s.mu.Lock()
		near := nearRefs(ref, s.idents)
		s.mu.Unlock()
		if len(near) > 0 {
			return nil, &notFoundNear{NotFoundError: nf, near: near}
		}
	}
	if err != nil {
		return nil, err
	}
	return s.st.GetTask(ctx, id.ID)
}

func (s *Service) resolveIdent(ctx context.Context, ref string, reload bool) (task.Ident, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idents == nil || reload {
		all, err := s.st.ListTasks(ctx)
		if err != nil {
			return task.Ident{}, err
		}
		s.idents = make([]task.Ident, len(all))
		for i, t := range all {
			s.idents[i] = task.Ident{ID: t.ID, Code: t.CodeString()}
		}
	}
	return task.Resolve(ref, s.idents)
}

func (s *Service) remember(t *store.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idents != nil {
		s.idents = append(s.idents, task.Ident{ID: t.ID, Code: t.CodeString()})
	}
}

// Info converts a task row to its wire form.
func Info(t *store.Task) api.TaskInfo { return InfoOf(t) }

// NewTask creates branch lazy/<ref> and its worktree, saves the task and
// queues its first work turn.
func (s *Service) NewTask(ctx context.Context, a api.NewTaskArgs) (*api.NewTaskResult, error) {
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, usage("a task needs a prompt: lazy task new -m \"what to do\"")
	}
	if err := s.sup.OutOfCluster(); err != nil {
		return nil, err // its start could not be handed to any member
	}
	if a.Code != "" {
		if err := task.ValidCode(a.Code); err != nil {
			return nil, &UsageError{Msg: err.Error()}
		}
	}
	if a.Role != "" {
		if _, ok := s.live.Get().Models.Roles[a.Role]; !ok {
			return nil, usage("role %q is not configured: add [models.roles.%s] to %s, or leave --role out", a.Role, a.Role, config.FileName)
		}
	}
	for _, g := range a.Scope {
		if _, err := filepath.Match(g, "x"); err != nil {
			return nil, usage("--scope %q is not a valid glob: %v", g, err)
		}
	}
	if a.Driver != "" && !config.KnownDriver(a.Driver) {
		return nil, usage("--driver %q is not a driver: use %s (or leave it out for agent.driver)", a.Driver, strings.Join(config.Drivers, ", "))
	}
	if err := s.creds.gate(a.Role, a.Driver); err != nil {
		return nil, err
	}
	if s.runnerReady != nil {
		// a task whose turns are sure to be refused is not made
		if err := s.runnerReady(); err != nil {
			return nil, usage("no task was created: agent turns cannot run here: %v; install bubblewrap (apt-get install bubblewrap: the running daemon sees it, no restart) and run lazy task new again, or set agent.runner = \"process\" in %s to run agents unsandboxed", err, config.FileName)
		}
	}
	parent := a.Parent
	if parent == "" {
		p, err := gitx.CurrentBranch(ctx, s.paths.Root)
		if err != nil {
			return nil, &UsageError{Msg: err.Error()}
		}
		parent = p
	}
	if _, err := gitx.RevParse(ctx, s.paths.Root, parent); err != nil {
		if _, err := gitx.RevParse(ctx, s.paths.Root, "HEAD"); err != nil && !hasBranches(ctx, s.paths.Root) {
			return nil, usage("this repository has no commits yet: make a first commit (git commit --allow-empty -m init), then run lazy task new again")
		}
		return nil, usage("parent %q is not a branch or commit of %s: pass --parent BRANCH", parent, s.paths.Root)
	}
	// One creation at a time: the id, code and branch checks below and the
	// insert must not interleave with another creation's.
	s.createMu.Lock()
	defer s.createMu.Unlock()
	all, err := s.st.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	t := &store.Task{Title: title(a.Prompt), Prompt: a.Prompt, Status: task.Running, Role: a.Role,
		Parent: parent, CreatedAt: now, UpdatedAt: now, LastActivity: now, BudgetTokens: a.BudgetTokens, Agent: a.Driver}
	if a.BudgetTokens < 0 {
		return nil, usage("--budget-tokens %d: give 0 (no budget) or more tokens", a.BudgetTokens)
	}
	if t.BudgetTokens == 0 {
		t.BudgetTokens = s.live.Get().Agent.BudgetTokens
	}
	if a.Code != "" {
		code := a.Code
		t.Code = &code
		for _, o := range all {
			if o.CodeString() == a.Code {
				return nil, usage("task code %q is taken by task %s; choose another --code", a.Code, o.ID)
			}
			if task.ShortID(o.ID) == a.Code {
				return nil, usage("task code %q is task %s's short id; choose another --code", a.Code, o.ID)
			}
		}
	}
	// A short id is taken when another task has it or uses it as its code,
	// or when its branch exists (left by hand, or by a task made elsewhere).
	t.ID, err = task.NewTaskID(now, func(short string) bool {
		for _, o := range all {
			if task.ShortID(o.ID) == short || o.CodeString() == short {
				return true
			}
		}
		return a.Code == "" && gitx.BranchExists(ctx, s.paths.Root, "lazy/"+short)
	})
	if err != nil {
		return nil, err
	}
	if len(a.Scope) > 0 {
		b, _ := json.Marshal(a.Scope)
		t.Scope = string(b)
	}
	ref := t.Ref()
	t.Branch = "lazy/" + ref
	t.Worktree = filepath.Join(s.paths.Worktrees, ref)
	if gitx.BranchExists(ctx, s.paths.Root, t.Branch) {
		for _, o := range all {
			if o.Branch == t.Branch {
				return nil, usage("branch %s belongs to task %s (%s); choose another --code", t.Branch, o.Ref(), o.Status)
			}
		}
		return nil, usage("branch %s already exists and no task owns it: choose another --code, or look at it (git log %s) and delete it if nothing there is needed (git branch -D %s)", t.Branch, t.Branch, t.Branch)
	}
	if err := gitx.CreateTask(ctx, s.paths.Root, t.Worktree, t.Branch, parent); err != nil {
		return nil, err
	}
	if s.remote != "" {
		// the member that hosts the task may be another: the branch goes
		// to the cluster's remote before the task exists
		if err := gitx.Depart(ctx, s.paths.Root, s.remote, t.Branch); err != nil {
			_ = gitx.TaskRepo{Worktree: t.Worktree}.Remove()
			_, _ = gitx.Run(ctx, s.paths.Root, "branch", "-D", t.Branch)
			return nil, fmt.Errorf("%w; nothing was created", err)
		}
	}
	if err := s.st.CreateTask(ctx, t); err != nil {
		_ = gitx.TaskRepo{Worktree: t.Worktree}.Remove()
		_, _ = gitx.Run(ctx, s.paths.Root, "branch", "-D", t.Branch)
		if errors.Is(err, store.ErrConflict) {
			return nil, usage("task code %q is taken; choose another --code", a.Code)
		}
		return nil, err
	}
	s.remember(t)
	wq, err := supervisor.Ask[*actors.WorkQueued](s.sup, t.ID, &actors.StartWork{Trigger: "start", Prompt: a.Prompt})
	if err != nil {
		return nil, fmt.Errorf("queue the first turn of %s: %w", ref, err)
	}
	res := &api.NewTaskResult{Task: Info(t), Turn: *TurnOf(&wq.Turn)}
	if dir, dirty, err := gitx.DirtyCheckout(ctx, s.paths.Root, t.Parent, nil); err == nil && len(dirty) > 0 {
		shown := dirty
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(dirty)-10))
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("your checkout at %s has uncommitted changes (%s): the task starts from the last commit of %s, without them; commit them first if the agent should see them",
			dir, strings.Join(shown, ", "), t.Parent))
	}
	return res, nil
}

// hasBranches reports whether the repository at root has any branch (a
// repository with no commits has none).
func hasBranches(ctx context.Context, root string) bool {
	out, err := gitx.Run(ctx, root, "for-each-ref", "--count=1", "--format=%(refname)", "refs/heads/")
	return err != nil || strings.TrimSpace(out) != ""
}

func title(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if len(line) > 80 {
		line = line[:77] + "..."
	}
	return line
}

// ListTasks lists every task.
func (s *Service) ListTasks(ctx context.Context) ([]api.TaskInfo, error) {
	all, err := s.st.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.TaskInfo, len(all))
	for i := range all {
		out[i] = s.info(&all[i])
	}
	return out, nil
}

// ShowTask is one task with its turns and comments.
func (s *Service) ShowTask(ctx context.Context, ref string) (*api.TaskDetail, error) {
	t, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	d, err := DetailOf(ctx, s.st, s.info(t), func(ctx context.Context) ([]api.CommitInfo, error) { return s.commits(ctx, t) })
	if err == nil && s.transcripts != nil {
		s.transcripts.overlay(d) // the running turn's so far
	}
	return d, err
}

// TaskTranscript is what the model said in one turn of a task: the turn
// a.Turn names, or the latest that has a transcript; the running turn's as
// far as it went.
func (s *Service) TaskTranscript(ctx context.Context, a api.TranscriptArgs) (*api.TurnTranscript, error) {
	t, err := s.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	// the turns and their transcripts only: no git log of the branch
	d, err := DetailOf(ctx, s.st, s.info(t), func(context.Context) ([]api.CommitInfo, error) { return nil, nil })
	if err != nil {
		return nil, err
	}
	if s.transcripts != nil {
		s.transcripts.overlay(d) // the running turn's so far
	}
	for i := len(d.Turns) - 1; i >= 0; i-- {
		t := d.Turns[i]
		if a.Turn != 0 && t.Number != a.Turn {
			continue
		}
		if t.Transcript == nil {
			break
		}
		return t.Transcript, nil
	}
	if a.Turn != 0 {
		return nil, fmt.Errorf("task %s has no transcript of turn %d (turns are numbered as lazy task show lists them; a turn with no model call has none): %w", d.Task.Ref, a.Turn, store.ErrNotFound)
	}
	return nil, fmt.Errorf("task %s has no transcript yet: one is kept for each turn that called the model: %w", d.Task.Ref, store.ErrNotFound)
}

// TaskCommits lists the commits of a task's branch that its parent lacks.
func (s *Service) TaskCommits(ctx context.Context, ref string) ([]api.CommitInfo, error) {
	t, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.commits(ctx, t)
}

func (s *Service) commits(ctx context.Context, t *store.Task) ([]api.CommitInfo, error) {
	s.follow(ctx, t)
	out := []api.CommitInfo{}
	sp := span(t) // an ended task's commits are the ones it merged or left
	key := ""
	from, ferr := gitx.RevParse(ctx, s.paths.Root, sp.From)
	to, terr := gitx.RevParse(ctx, s.paths.Root, sp.To)
	if ferr == nil && terr == nil {
		key, sp.From, sp.To = from+".."+to, from, to
		if c, ok := s.logs.get(key); ok {
			return c, nil
		}
	}
	commits, err := gitx.Log(ctx, s.paths.Root, sp.From, sp.To)
	if err != nil {
		return out, nil // the branch may be gone after an accept; the page shows none
	}
	for _, c := range commits {
		out = append(out, CommitOf(c))
	}
	if key != "" {
		s.logs.put(key, out)
	}
	return out, nil
}

// CommitDiff is one commit of the project and its diff.
func (s *Service) CommitDiff(ctx context.Context, sha string) (*api.CommitDiff, error) {
	if len(sha) < 4 || len(sha) > 64 || strings.Trim(strings.ToLower(sha), "0123456789abcdef") != "" {
		return nil, usage("%q is not a commit id: use 4 to 40 hex digits", sha)
	}
	c, d, err := gitx.Show(ctx, s.paths.Root, sha)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", sha, store.ErrNotFound)
	}
	return &api.CommitDiff{CommitInfo: CommitOf(c), Files: orEmpty(d.Files)}, nil
}

// Comment adds an ordinary comment (auto-react on a blocked task).
func (s *Service) Comment(ctx context.Context, ref, body string) (*api.CommentResult, error) {
	if strings.TrimSpace(body) == "" {
		return nil, usage("the comment is empty: lazy comment TASK -m \"text\"")
	}
	if len(body) > maxCommentBody { // the same bound as a review comment: it rides a prompt
		return nil, usage("the message is %d bytes; keep it under %d (put long text in a file of the task's branch and point to it)", len(body), maxCommentBody)
	}
	t, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	ca, err := supervisor.Ask[*actors.CommentAdded](s.sup, t.ID, &actors.AddComment{Body: body})
	if err != nil {
		return nil, err
	}
	res := &api.CommentResult{Comment: MessageOf(ca.Comment), Triggered: TurnOf(ca.Triggered),
		Notice: review.MessageQueued(ca.Next, ca.Triggered != nil, ca.Status)}
	if res.Triggered != nil {
		res.Triggered.Notice = ca.Notice
	}
	return res, nil
}

// Unblock queues the work turn carrying every queued review comment and the
// reviewer's message: the page's unblock and `lazy unblock` are one path.
func (s *Service) Unblock(ctx context.Context, ref, message string) (*api.Turn, error) {
	t, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(message) == "" {
		message = "Continue."
	}
	wq, err := supervisor.Ask[*actors.WorkQueued](s.sup, t.ID, &actors.Unblock{Message: message, ID: task.NewID(time.Now())})
	if err != nil {
		return nil, err
	}
	tu := TurnOf(&wq.Turn)
	tu.Notice = wq.Notice // the agent changed: the turn starts a new conversation
	return tu, nil
}

// Cancel ends a task.
func (s *Service) Cancel(ctx context.Context, ref string) (*api.TaskInfo, error) {
	t, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if _, err := supervisor.Ask[*actors.Done](s.sup, t.ID, &actors.CancelTask{}); err != nil {
		return nil, err
	}
	t, err = s.st.GetTask(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	info := Info(t)
	return &info, nil
}

// Actors is the health table.
func (s *Service) Actors(context.Context) ([]api.ActorHealth, error) { return s.sup.Health(), nil }

// InjectPanic makes an actor panic (grants, traffic, or a task).
func (s *Service) InjectPanic(ctx context.Context, target string) error {
	if target != "grants" && target != "traffic" {
		t, err := s.Resolve(ctx, target)
		if err != nil {
			return err
		}
		target = t.ID
	}
	return s.sup.InjectPanic(target, "requested over RPC")
}

// Watch subscribes to events; taskRefs are resolved per spec §6.2. A filter
// given but naming no task is refused, never read as "no filter".
func (s *Service) Watch(ctx context.Context, a api.WatchArgs) (<-chan api.Event, func(), error) {
	f := actors.Filter{Net: a.Net, Tasks: !a.NetOnly}
	f.Transcript = f.Tasks && a.Transcript
	if a.Tasks != nil {
		if len(a.Tasks) == 0 {
			return nil, nil, usage("the task filter names no task: give --task with a code, a short id or a full id, or leave it out to watch everything")
		}
		f.IDs, f.Refs = map[string]bool{}, map[string]bool{}
		for _, ref := range a.Tasks {
			if strings.TrimSpace(ref) == "" {
				return nil, nil, usage("an empty --task names no task: give a code, a short id or a full id")
			}
			t, err := s.Resolve(ctx, ref)
			if err != nil {
				return nil, nil, err
			}
			f.IDs[t.ID] = true
			f.Refs[t.Ref()] = true
		}
	}
	return s.sup.Subscribe(f, 256)
}

// credentials reads the real credential files for the launch gate and for the
// shape of placeholders. Their values never leave this type except to the
// proxy's last hop.
type credentials struct {
	live *liveConfig
	home string
}

// needsProvider reports whether role's upstream takes the provider credential.
func (c *credentials) needsProvider(role string) bool {
	cfg := c.live.Get()
	targets, err := cfg.Targets()
	if err != nil {
		return true
	}
	upstream := cfg.Proxy.Upstream
	if role != "" {
		r := cfg.Models.Roles[role]
		if r.Local {
			return false
		}
		upstream = r.Endpoint
	}
	o, err := config.Origin(upstream)
	if err != nil {
		return true
	}
	return targets[o].Credential == config.CredentialProvider
}

// gate refuses a launch whose upstream needs a provider credential that is
// not there or cannot be used (checkCredential says which and the fix).
func (c *credentials) gate(role, driver string) error {
	if err := c.check(role, driver); err != nil {
		return &UsageError{Msg: err.Error()}
	}
	return nil
}

// check is what is wrong now with the credential files a launch for role
// needs (nil: nothing).
func (c *credentials) check(role, driver string) error {
	if c == nil {
		return nil
	}
	cfg := c.live.Get()
	if driver == "" {
		driver = cfg.Agent.Driver
	}
	if driver == "codex" {
		// codex calls [proxy.openai] only: its key is the one it needs
		if needsOpenAIFile(cfg) {
			return checkCredential(cfg.OpenAICredentialFile(c.home), credentialKindOpenAI, time.Now())
		}
		return nil
	}
	if driver == "gemini" {
		// gemini calls [proxy.gemini] only: its key is the one it needs
		if needsGeminiFile(cfg) {
			return checkCredential(cfg.GeminiCredentialFile(c.home), credentialKindGemini, time.Now())
		}
		return nil
	}
	if c.needsProvider(role) {
		if err := checkCredential(cfg.ProviderCredentialFile(c.home), cfg.Credentials.Provider.Kind, time.Now()); err != nil {
			return err
		}
	}
	if err := checkCredential(cfg.EditorCredentialFile(c.home), credentialKindEditor, time.Now()); err != nil && !isMissing(err) {
		return err
	}
	return nil
}

// shape returns the real provider value only to copy its prefix; "" if absent.
func (c *credentials) shape() string {
	return shapeOf(c.live.Get().ProviderCredentialFile(c.home))
}

// openAIShape is shape for the OpenAI key.
func (c *credentials) openAIShape() string {
	return shapeOf(c.live.Get().OpenAICredentialFile(c.home))
}

func shapeOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	cred, err := proxy.ParseCredential(b)
	if err != nil {
		return ""
	}
	return cred.Value
}

// HTTPStatus makes a usage error a 400.
func (e *UsageError) HTTPStatus() int { return 400 }

// info is the task's wire form with what is going wrong with it right now.
func (s *Service) info(t *store.Task) api.TaskInfo {
	i := Info(t)
	if s.trouble != nil {
		i.ModelError = s.trouble.of(t.ID)
	}
	if s.usage != nil {
		i.Usage, i.LastTurn, i.LastTurnNo = s.usage.of(context.Background(), t.ID)
	}
	return i
}

// Rename gives a task a new title: the queue, the pages and `task list`
// show it. A title is one line of at most 200 characters.
func (s *Service) Rename(ctx context.Context, a api.RenameArgs) (*api.TaskInfo, error) {
	title := strings.TrimSpace(a.Title)
	switch {
	case title == "":
		return nil, usage("the title is empty: lazy task rename TASK --title \"what the task is\"")
	case utf8.RuneCountInString(title) > maxTitle:
		return nil, usage("the title is %d characters: keep it to %d (the prompt holds the detail)", utf8.RuneCountInString(title), maxTitle)
	case strings.ContainsFunc(title, unicode.IsControl):
		return nil, usage("the title holds a line break or control character: give it one line of text")
	}
	t, err := s.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	if _, err := supervisor.Ask[*actors.Done](s.sup, t.ID, &actors.Rename{Title: title}); err != nil {
		return nil, err
	}
	if t, err = s.st.GetTask(ctx, t.ID); err != nil {
		return nil, err
	}
	i := s.info(t)
	return &i, nil
}

// maxTitle bounds a task title, in characters.
const maxTitle = 200

// SetBudget changes a task's token budget (0: none). A task stopped by its
// budget goes on when the reviewer unblocks it.
func (s *Service) SetBudget(ctx context.Context, ref string, tokens int64) (*api.TaskInfo, error) {
	if tokens < 0 {
		return nil, usage("--tokens %d: give 0 (no budget) or more tokens", tokens)
	}
	t, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if t.Status.Ended() {
		return nil, usage("task %s has ended (%s): its budget no longer matters", t.Ref(), t.Status)
	}
	if _, err := supervisor.Ask[*actors.Done](s.sup, t.ID, &actors.SetBudget{Tokens: tokens}); err != nil {
		return nil, err
	}
	if s.usage != nil {
		s.usage.setBudget(ctx, t.ID, tokens)
	}
	if t, err = s.st.GetTask(ctx, t.ID); err != nil {
		return nil, err
	}
	i := s.info(t)
	return &i, nil
}

// orEmpty makes no files an empty list, so the JSON says [] rather than null.
func orEmpty(fs []gitx.File) []gitx.File {
	if fs == nil {
		return []gitx.File{}
	}
	return fs
}
