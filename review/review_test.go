package review

import (
	"strings"
	"testing"
	"time"

	"lazy/task"
)

const tid = "0190aaaa000070008000000000000001"

func msg(mod func(*ReviewComment)) *ReviewComment {
	c := &ReviewComment{ID: "c1", TaskID: tid, ThreadID: "t1", File: "a.go", Line: 3, Side: New, Actor: Human, CreatedAt: time.Now()}
	mod(c)
	return c
}

var (
	now           = time.Now()
	queuedComment = msg(func(c *ReviewComment) { c.Intent, c.DeliveryState = Comment, PendingDelivery })
	delivered     = msg(func(c *ReviewComment) { c.Intent, c.DeliveryState, c.DeliveredTurn = Comment, Delivered, 4 })
	askPending    = msg(func(c *ReviewComment) { c.Intent, c.AskState = Ask, AskPending })
	askAnswered   = msg(func(c *ReviewComment) { c.Intent, c.AskState = Ask, AskAnswered })
	askFailed     = msg(func(c *ReviewComment) { c.Intent, c.AskState, c.AskError = Ask, AskFailed, "x" })
	agentReply    = msg(func(c *ReviewComment) { c.Actor, c.Intent = Agent, Ask })
	withdrawn     = msg(func(c *ReviewComment) { c.Intent, c.DeliveryState, c.WithdrawnAt = Comment, PendingDelivery, &now })
	otherTask     = msg(func(c *ReviewComment) {
		c.TaskID = "0190bbbb000070008000000000000002"
		c.Intent, c.DeliveryState = Comment, PendingDelivery
	})
)

func TestCanWithdraw(t *testing.T) {
	cases := []struct {
		name string
		c    *ReviewComment
		ok   bool
		why  string
	}{
		{"queued comment", queuedComment, true, ""},
		{"failed ask", askFailed, true, ""},
		{"delivered comment", delivered, false, "turn 4"},
		{"ask in flight", askPending, false, "answering this question right now"},
		{"answered ask", askAnswered, false, "already answered"},
		{"agent reply", agentReply, false, "agent wrote"},
		{"not on this task", otherTask, false, "not on this task"},
		{"missing", nil, false, "not on this task"},
		{"already withdrawn", withdrawn, false, "Already withdrawn"},
	}
	for _, tc := range cases {
		v := CanWithdraw(tc.c, tid)
		if v.OK != tc.ok || !strings.Contains(v.Reason, tc.why) {
			t.Errorf("%s: got %+v, want ok=%v reason ~%q", tc.name, v, tc.ok, tc.why)
		}
	}
}

func TestCanRetry(t *testing.T) {
	cases := []struct {
		name     string
		c        *ReviewComment
		ok, noop bool
		why      string
	}{
		{"failed ask", askFailed, true, false, ""},
		{"ask in flight is a no-op", askPending, true, true, "already with the agent"},
		{"queued comment", queuedComment, false, false, "next unblock"},
		{"answered", askAnswered, false, false, "already answered"},
		{"agent reply", agentReply, false, false, "agent's reply"},
		{"other task", otherTask, false, false, "not on this task"},
	}
	for _, tc := range cases {
		v := CanRetry(tc.c, tid)
		if v.OK != tc.ok || v.NoOp != tc.noop || !strings.Contains(v.Reason, tc.why) {
			t.Errorf("%s: got %+v", tc.name, v)
		}
	}
}

func TestAskable(t *testing.T) {
	for _, s := range task.Statuses {
		v := Askable(s)
		want := s == task.Blocked || s == task.Conflict
		if v.OK != want || (!v.OK && v.Reason == "") {
			t.Errorf("%s: got %+v", s, v)
		}
	}
}

func TestCountsIgnoreWithdrawn(t *testing.T) {
	all := []ReviewComment{*queuedComment, *withdrawn, *askPending, *askFailed, *askAnswered, *delivered, *agentReply}
	c := Count(all)
	if c.Queued != 1 || c.PendingAsks != 1 || c.AwaitingAnswer != 2 {
		t.Errorf("counts: %+v", c)
	}
	if q := Queued(all); len(q) != 1 || q[0].WithdrawnAt != nil {
		t.Errorf("queued: %+v", q)
	}
}

func TestRenderUnblockPrompt(t *testing.T) {
	if got := RenderUnblockPrompt(nil, nil, "just go"); got != "just go" {
		t.Errorf("nothing queued must be the message alone, unwrapped: %q", got)
	}
	c1 := ReviewComment{ID: "c1", ThreadID: "t1", File: "a.go", Line: 3, Side: New, LineText: "x := 1", Intent: Comment, Body: "rename x", Actor: Human}
	c2 := ReviewComment{ID: "c2", ThreadID: "t2", File: "b.go", Line: 9, Side: Old, LineText: "old()", Intent: Comment, Body: "why gone?", Actor: Human}
	a1 := ReviewComment{ID: "a1", ThreadID: "t1", Intent: Ask, Body: "what is x?", Actor: Human, AskState: AskAnswered}
	r1 := ReviewComment{ID: "r1", ThreadID: "t1", Intent: Ask, Body: "a counter", Actor: Agent}
	gone := ReviewComment{ID: "w1", ThreadID: "t1", Intent: Ask, Body: "WITHDRAWN-TEXT", Actor: Human, AskState: AskFailed, WithdrawnAt: &now}
	threads := map[string][]ReviewComment{"t1": {a1, r1, gone, c1}, "t2": {c2}}
	got := RenderUnblockPrompt([]ReviewComment{c1, c2}, func(id string) []ReviewComment { return threads[id] }, "Overall: good")
	for _, want := range []string{"1. a.go, line 3 (new)", "Line: x := 1", "Reviewer asked: what is x?", "You answered: a counter", "Comment: rename x",
		"2. b.go, line 9 (old)", "Line: old()", "Comment: why gone?", "Reviewer's message:\nOverall: good"} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "WITHDRAWN-TEXT") {
		t.Error("a withdrawn message reached the prompt")
	}
	if strings.Index(got, "rename x") > strings.Index(got, "why gone?") || strings.Index(got, "why gone?") > strings.Index(got, "Overall") {
		t.Error("comments in order, then the message")
	}
}

func TestRemedy(t *testing.T) {
	r := Refuse(ReasonPassphraseRequired, "fix login", "main", "it's fine", []string{".github/ci.yml", "a b.txt"})
	if r.Remedy.Command != `lazy accept 'fix login' --reason 'it'\''s fine' --approve-file .github/ci.yml --approve-file 'a b.txt'` {
		t.Errorf("command: %s", r.Remedy.Command)
	}
	if r.Remedy.UIAction != ActionPassphrase || len(r.Remedy.Files) != 2 || !r.Remedy.Usable() {
		t.Errorf("remedy: %+v", r.Remedy)
	}
	if b := Refuse(ReasonBehindParent, "x", "main", "", nil); b.Remedy.UIAction != ActionSync || b.Remedy.Command != "lazy sync x" {
		t.Errorf("behind: %+v", b.Remedy)
	}
	for _, raw := range []string{`{"reason":"weird","next":"do it"}`, `{"reason":"no_commits","next":"  "}`, `not json`, ``} {
		if ParseRemedy([]byte(raw)) != nil {
			t.Errorf("%q must degrade to no remedy", raw)
		}
	}
	if ParseRemedy([]byte(`{"reason":"no_commits","next":"commit"}`)) == nil {
		t.Error("a known reason with a next step is a remedy")
	}
}

func TestBuildThreadsOrphans(t *testing.T) {
	a := ReviewComment{ID: "1", ThreadID: "t1", File: "a.go", Line: 1, Side: New, CreatedAt: now}
	b := ReviewComment{ID: "2", ThreadID: "t2", File: "gone.go", Line: 7, Side: Old, CreatedAt: now.Add(time.Second)}
	c := ReviewComment{ID: "3", ThreadID: "t1", File: "a.go", Line: 1, Side: New, CreatedAt: now.Add(2 * time.Second)}
	ts := BuildThreads([]ReviewComment{c, b, a}, func(f string, s Side, l int) bool { return f == "a.go" })
	if len(ts) != 2 || ts[0].ID != "t1" || len(ts[0].Messages) != 2 || ts[0].Messages[0].ID != "1" || ts[0].Orphan || !ts[1].Orphan {
		t.Errorf("threads: %+v", ts)
	}
}

func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"a", "a b", "it's", "", "$(x)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := ShellQuote(s)
		if strings.ContainsAny(s, " '\"$`\\;&|<>()*?!#~\n\t") && !strings.HasPrefix(q, "'") {
			t.Fatalf("%q quoted as %q", s, q)
		}
	})
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, p string
		want   bool
	}{
		{".github/**", ".github/workflows/ci.yml", true},
		{".github/**", ".github", true},
		{".lazy/config.toml", ".lazy/config.toml", true},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "src/x/a.go", false},
		{"**/*.md", "docs/a/b.md", true},
		{"**/*.md", "README.md", true},
		{"docs/**/x", "docs/x", true},
		{"a/b", "a/b/c", false},
	} {
		if got := MatchGlob(tc.pat, tc.p); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v", tc.pat, tc.p, got)
		}
	}
	if got := OutOfScope([]string{"src/**"}, []string{"src/a.go", "README.md", "x.go"}, map[string]bool{"x.go": true}); len(got) != 1 || got[0] != "README.md" {
		t.Errorf("OutOfScope: %v", got)
	}
}

// FuzzParseRemedy: whatever arrives in an error body, a remedy is either
// absent or usable (a known reason and a next step).
func FuzzParseRemedy(f *testing.F) {
	for _, s := range []string{`{"reason":"no_commits","next":"commit"}`, `{"reason":"martian","next":"x"}`, `null`, `{"reason":"out_of_scope","next":" ","files":["a"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r := ParseRemedy(b); r != nil && !r.Usable() {
			t.Fatalf("%q gave an unusable remedy %+v", b, r)
		}
	})
}

// A task message (no anchor) is queued, counted and rendered like a review
// comment, and is in no thread of the diff.
func TestTaskMessageIsQueuedLikeAComment(t *testing.T) {
	msg := ReviewComment{ID: "m1", ThreadID: "m1", Intent: Comment, Body: "also update the README", Actor: Human, DeliveryState: PendingDelivery}
	line := ReviewComment{ID: "c1", ThreadID: "t1", File: "a.go", Line: 3, Side: New, Intent: Comment, Body: "rename x", Actor: Human, DeliveryState: PendingDelivery}
	all := []ReviewComment{line, msg}
	if c := Count(all); c.Queued != 2 {
		t.Errorf("queued: got %d, want 2", c.Queued)
	}
	if th := BuildThreads(all, nil); len(th) != 1 || th[0].ID != "t1" {
		t.Errorf("threads: got %+v, want the line comment's only", th)
	}
	got := RenderUnblockPrompt(Queued(all), func(string) []ReviewComment { return nil }, "")
	for _, want := range []string{"1. a.go, line 3 (new)", "2. A message about the task as a whole", "Message: also update the README"} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%s", want, got)
		}
	}
	if v := CanWithdraw(&msg, ""); !v.OK {
		t.Errorf("a queued task message cannot be withdrawn: %s", v.Reason)
	}
}
