package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"lazy/errkind"
)

// Suggestion is a reviewer's suggested replacement of lines From to To
// (1-based, inclusive) of Path on the task branch, applied as a commit by
// Author.
type Suggestion struct {
	Path     string
	From, To int
	// LineText is what line To read when the reviewer commented ("": not
	// checked); another text there now is refused
	LineText string
	Lines    []string
	// Head is the branch head the reviewer saw; another head is refused
	// (CONTRACT §14)
	Head                    string
	AuthorName, AuthorEmail string
	Message                 string
}

// SuggestionError is a suggestion that cannot be applied as it stands;
// Why says why and what to do.
type SuggestionError struct{ Why string }

func (e *SuggestionError) Error() string { return e.Why }

// ErrorKind is errkind.Rule: a rule refused it, nothing failed.
func (e *SuggestionError) ErrorKind() errkind.Kind { return errkind.Rule }

// maxSuggestFile bounds the file a suggestion is applied to.
const maxSuggestFile = 8 << 20

// ApplySuggestion commits a suggestion on the task branch in the task's
// worktree and imports the commit; it returns the branch's new head. The
// file is read from the branch's head (never from the worktree, which the
// agent writes) and written as a blob; the worktree's copy is then checked
// out from it. Refused, with nothing changed: a head other than the one
// the reviewer saw, lines that no longer read as they did, a file that is
// not a plain file, uncommitted changes to it in the worktree, a merge
// half-finished.
func (t TaskRepo) ApplySuggestion(ctx context.Context, s Suggestion) (string, error) {
	if s.From < 1 || s.To < s.From {
		return "", &SuggestionError{Why: fmt.Sprintf("lines %d-%d are no range of lines", s.From, s.To)}
	}
	if s.AuthorName == "" || s.AuthorEmail == "" {
		return "", &SuggestionError{Why: "the reviewer's identity is unknown: set review.author = \"Name <email>\" in .lazy/config.toml"}
	}
	if on, err := t.MergeInProgress(); err != nil {
		return "", err
	} else if on {
		return "", &SuggestionError{Why: "a merge is half-finished in the task's worktree: unblock the agent to finish it, then apply the suggestion"}
	}
	objects, err := t.daemonWork(ctx)
	if err != nil {
		return "", err
	}
	head, err := RevParse(ctx, t.Project, "refs/heads/"+t.Branch)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", t.Branch, err)
	}
	if s.Head != "" && s.Head != head {
		return "", &SuggestionError{Why: fmt.Sprintf("the branch moved since you reviewed it (you saw %s, it is now %s): reload the page, review the new commits, then apply the suggestion", short(s.Head), short(head))}
	}
	tree, err := t.run(ctx, objects, "--literal-pathspecs", "ls-tree", "-z", head, "--", s.Path)
	if err != nil {
		return "", fmt.Errorf("find %s on %s: %w", s.Path, t.Branch, err)
	}
	mode, _, _ := strings.Cut(strings.TrimSuffix(tree, "\x00"), " ")
	if tree == "" {
		return "", &SuggestionError{Why: fmt.Sprintf("%s is no longer on the branch: the suggestion cannot be applied", s.Path)}
	}
	if mode != "100644" && mode != "100755" {
		return "", &SuggestionError{Why: fmt.Sprintf("%s is not a plain file on the branch (mode %s): apply the change by hand", s.Path, mode)}
	}
	if _, err := t.run(ctx, objects, "--literal-pathspecs", "diff", "--quiet", "--no-ext-diff", "--no-textconv", "--", s.Path); err != nil {
		var ge *Error
		if errors.As(err, &ge) && exitCode(ge.Err) == 1 {
			return "", &SuggestionError{Why: fmt.Sprintf("the task's worktree has changes to %s the agent did not commit: unblock the agent to commit or drop them, then apply the suggestion", s.Path)}
		}
		return "", fmt.Errorf("compare %s with the branch: %w", s.Path, err)
	}
	size, err := t.run(ctx, objects, "cat-file", "-s", head+":"+s.Path)
	if err != nil {
		return "", fmt.Errorf("size %s: %w", s.Path, err)
	}
	if n := parseInt(size); n > maxSuggestFile {
		return "", &SuggestionError{Why: fmt.Sprintf("%s is %d bytes, over the %d a suggestion is applied to: apply the change by hand", s.Path, n, maxSuggestFile)}
	}
	old, err := t.runIn(ctx, objects, nil, "cat-file", "blob", head+":"+s.Path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", s.Path, err)
	}
	body, err := replaceLines(old, s)
	if err != nil {
		return "", err
	}
	blob, err := t.runIn(ctx, objects, body, "hash-object", "-w", "--stdin")
	if err != nil {
		return "", fmt.Errorf("write the new %s: %w", s.Path, err)
	}
	if _, err := t.run(ctx, objects, "update-index", "--cacheinfo", mode+","+strings.TrimSpace(string(blob))+","+s.Path); err != nil {
		return "", fmt.Errorf("stage the new %s: %w", s.Path, err)
	}
	author := fmt.Sprintf("%s <%s>", s.AuthorName, s.AuthorEmail)
	if _, err := t.run(ctx, objects, "commit", "-q", "--no-verify", "--author", author, "-m", s.Message); err != nil {
		_, _ = t.run(ctx, objects, "read-tree", "HEAD")
		return "", fmt.Errorf("commit the suggestion: %w", err)
	}
	// the worktree follows the branch (git writes no file beneath a link)
	if _, err := t.run(ctx, objects, "--literal-pathspecs", "checkout", "--", s.Path); err != nil {
		return "", fmt.Errorf("bring the new %s into the worktree: %w", s.Path, err)
	}
	after, err := t.Import(ctx)
	if err != nil {
		return "", fmt.Errorf("bring the suggestion into the project: %w", err)
	}
	return after, nil
}

// replaceLines puts s.Lines in place of lines From to To of old, keeping
// the file's line endings; the lines must be there and line To must read
// s.LineText.
func replaceLines(old []byte, s Suggestion) ([]byte, error) {
	text := string(old)
	finalNL := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	if s.To > len(lines) {
		return nil, &SuggestionError{Why: fmt.Sprintf("%s has %d lines now, not the %d-%d the suggestion replaces: the lines no longer match; comment again on the file as it is", s.Path, len(lines), s.From, s.To)}
	}
	if n := len(s.Lines); n > 0 && s.From-1+n <= len(lines) {
		same := true
		for i, l := range s.Lines {
			same = same && strings.TrimSuffix(lines[s.From-1+i], "\r") == strings.TrimSuffix(l, "\r")
		}
		if same {
			return nil, &SuggestionError{Why: fmt.Sprintf("%s already reads as suggested from line %d: nothing to apply", s.Path, s.From)}
		}
	}
	last := lines[s.To-1]
	crlf := strings.HasSuffix(last, "\r")
	if s.LineText != "" && strings.TrimSuffix(last, "\r") != strings.TrimSuffix(s.LineText, "\r") {
		return nil, &SuggestionError{Why: fmt.Sprintf("line %d of %s no longer reads as it did when you suggested the change: the lines no longer match; comment again on the file as it is", s.To, s.Path)}
	}
	repl := make([]string, len(s.Lines))
	for i, l := range s.Lines {
		if crlf && !strings.HasSuffix(l, "\r") {
			l += "\r"
		}
		repl[i] = l
	}
	out := append(append(append([]string{}, lines[:s.From-1]...), repl...), lines[s.To:]...)
	joined := strings.Join(out, "\n")
	if len(out) > 0 && (finalNL || s.To < len(lines)) {
		joined += "\n"
	}
	return []byte(joined), nil
}

// runIn is run with stdin, returning stdout untouched.
func (t TaskRepo) runIn(ctx context.Context, objects string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append(append(append([]string{}, SafeConfig...), taskConfig...), args...)...)
	cmd.Dir = t.Worktree
	cmd.Env = t.taskEnv(objects)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &Error{Args: args, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func parseInt(s string) int64 {
	var n int64
	for _, c := range strings.TrimSpace(s) {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
