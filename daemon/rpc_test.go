package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// declaredCommands reads api/commands.go: each command's Go name (CmdX)
// by its wire name.
func declaredCommands(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../api/commands.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		idx, ok := lit.Type.(*ast.IndexListExpr)
		if !ok {
			return true
		}
		if id, ok := idx.X.(*ast.Ident); !ok || (id.Name != "Cmd" && id.Name != "Stream") || len(lit.Elts) != 1 {
			return true
		}
		if s, ok := lit.Elts[0].(*ast.BasicLit); ok {
			name, _ := strconv.Unquote(s.Value)
			declared[name] = vs.Names[0].Name
		}
		return true
	})
	if len(declared) < 20 {
		t.Fatalf("found only %d commands in api/commands.go: the parse is wrong", len(declared))
	}
	return declared
}

// TestEveryCommandIsServed: each command package api declares has its one
// entry in the daemon's dispatch table, and the table serves nothing api
// does not declare, so a command cannot be half added.
func TestEveryCommandIsServed(t *testing.T) {
	var declared []string
	for name := range declaredCommands(t) {
		declared = append(declared, name)
	}
	served := (&Daemon{}).commands(func() {}).Names()
	slices.Sort(declared)
	if !slices.Equal(declared, served) {
		t.Errorf("api declares %s\nthe table serves %s", strings.Join(declared, " "), strings.Join(served, " "))
	}
}

// TestEveryCommandIsCalledAndDocumented: each declared command has a
// caller (the CLI, a page or the client: a non-test file of cmd, httpapi
// or client names it) and its line in docs/ARCHITECTURE.md's list of
// commands, so "How to add a command" cannot be walked halfway. The
// table entry is TestEveryCommandIsServed's; the cluster codec's entry
// for the actor message it sends is package grain's
// TestEveryTaskMessageIsRegistered.
func TestEveryCommandIsCalledAndDocumented(t *testing.T) {
	var callers strings.Builder
	for _, dir := range []string{"../cmd", "../httpapi", "../client"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			callers.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	docs, err := os.ReadFile("../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for wire, goName := range declaredCommands(t) {
		if !strings.Contains(callers.String(), "api."+goName) {
			t.Errorf("api.%s (%s) has no caller in cmd, httpapi or client: give it its CLI command (or page)", goName, wire)
		}
		if !strings.Contains(string(docs), "| `"+wire+"` |") {
			t.Errorf("%s has no line in docs/ARCHITECTURE.md's table of commands (| `%s` | …)", wire, wire)
		}
	}
}
