package gitx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazy/gitx/gitxtest"
)

func git1(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimRight(gitxtest.Git(t, dir, args...), "\n")
}

func TestApplySuggestion(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.go": "package a\n\nfunc A() int {\n\treturn 1\n}\n"})
	tr := newTask(t, root, "sg")
	agentCommit(t, tr, "agent", map[string]string{"a.go": "package a\n\nfunc A() int {\n\tx := 1\n\treturn x\n}\n"})
	head := git1(t, root, "rev-parse", "refs/heads/lazy/sg")
	s := Suggestion{Path: "a.go", From: 4, To: 5, LineText: "\treturn x", Lines: []string{"\treturn 1 // no need for x"},
		Head: head, AuthorName: "Rita Reviewer", AuthorEmail: "rita@example.com", Message: "Apply suggestion on a.go"}

	t.Run("moved head refused", func(t *testing.T) {
		moved := s
		moved.Head = strings.Repeat("0", 40)
		_, err := tr.ApplySuggestion(ctx, moved)
		var se *SuggestionError
		if !errors.As(err, &se) || !strings.Contains(se.Why, "the branch moved since you reviewed it") {
			t.Fatalf("got %v, want a head-moved refusal", err)
		}
	})
	t.Run("lines that changed refused", func(t *testing.T) {
		other := s
		other.LineText = "\treturn y"
		_, err := tr.ApplySuggestion(ctx, other)
		var se *SuggestionError
		if !errors.As(err, &se) || !strings.Contains(se.Why, "no longer reads as it did") {
			t.Fatalf("got %v, want a lines-changed refusal", err)
		}
	})
	t.Run("uncommitted agent edit refused", func(t *testing.T) {
		p := filepath.Join(tr.Worktree, "a.go")
		orig, _ := os.ReadFile(p)
		if err := os.WriteFile(p, append(orig, "// wip\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := tr.ApplySuggestion(ctx, s)
		var se *SuggestionError
		if !errors.As(err, &se) || !strings.Contains(se.Why, "did not commit") {
			t.Fatalf("got %v, want an uncommitted-changes refusal", err)
		}
		if err := os.WriteFile(p, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if got := git1(t, root, "rev-parse", "refs/heads/lazy/sg"); got != head {
		t.Fatalf("a refused suggestion moved the branch: %s, want %s", got, head)
	}

	after, err := tr.ApplySuggestion(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := git1(t, root, "rev-parse", "refs/heads/lazy/sg"); got != after || after == head {
		t.Fatalf("branch at %s after apply, reply %s, before %s", got, after, head)
	}
	if got := git1(t, root, "rev-parse", after+"^"); got != head {
		t.Fatalf("the commit's parent is %s, want the head %s", got, head)
	}
	author := git1(t, root, "log", "-1", "--format=%an <%ae>|%cn", after)
	if author != "Rita Reviewer <rita@example.com>|lazy" {
		t.Fatalf("author|committer: got %q, want the reviewer as author and lazy as committer", author)
	}
	want := "package a\n\nfunc A() int {\n\treturn 1 // no need for x\n}\n"
	if got := gitxtest.Git(t, root, "show", after+":a.go"); got != want {
		t.Fatalf("content at the commit:\n%q\nwant\n%q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(tr.Worktree, "a.go")); string(b) != want {
		t.Fatalf("the worktree did not follow: %q", b)
	}
	if st := git1(t, tr.Worktree, "status", "--porcelain"); st != "" {
		t.Fatalf("worktree not clean after apply: %q", st)
	}
	// the same suggestion again: the head it saw has moved on; at the new
	// head, the lines already read as suggested
	if _, err := tr.ApplySuggestion(ctx, s); err == nil || !strings.Contains(err.Error(), "moved") {
		t.Fatalf("applying twice: got %v, want a head-moved refusal", err)
	}
	again := s
	again.Head, again.From, again.To, again.LineText = after, 4, 4, ""
	if _, err := tr.ApplySuggestion(ctx, again); err == nil || !strings.Contains(err.Error(), "already reads as suggested") {
		t.Fatalf("applying at the new head: got %v, want already applied", err)
	}
}

// TestApplySuggestionLiteralPath: a path that reads as pathspec magic is
// the file of that name, nothing else.
func TestApplySuggestionLiteralPath(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"x.txt": "x\n"})
	tr := newTask(t, root, "lit")
	agentCommit(t, tr, "agent", map[string]string{":(glob)*.txt": "a\n", "x.txt": "y\n"})
	head := git1(t, root, "rev-parse", "refs/heads/lazy/lit")
	after, err := tr.ApplySuggestion(ctx, Suggestion{Path: ":(glob)*.txt", From: 1, To: 1, LineText: "a", Lines: []string{"b"},
		Head: head, AuthorName: "R", AuthorEmail: "r@x", Message: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitxtest.Git(t, root, "show", after+":x.txt"); got != "y\n" {
		t.Errorf("x.txt changed: %q", got)
	}
	if got := gitxtest.Git(t, root, "--literal-pathspecs", "show", after+"::(glob)*.txt"); got != "b\n" {
		t.Errorf("the file itself: %q", got)
	}
}

func TestReplaceLines(t *testing.T) {
	for _, tc := range []struct {
		name, old string
		from, to  int
		lines     []string
		want      string
	}{
		{"one line", "a\nb\nc\n", 2, 2, []string{"B"}, "a\nB\nc\n"},
		{"range to more", "a\nb\nc\n", 1, 2, []string{"x", "y", "z"}, "x\ny\nz\nc\n"},
		{"deleted", "a\nb\nc\n", 2, 3, nil, "a\n"},
		{"no final newline kept", "a\nb", 2, 2, []string{"c"}, "a\nc"},
		{"crlf kept", "a\r\nb\r\n", 2, 2, []string{"c"}, "a\r\nc\r\n"},
	} {
		got, err := replaceLines([]byte(tc.old), Suggestion{Path: "f", From: tc.from, To: tc.to, Lines: tc.lines})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
