package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryCommandIsServed: each command package api declares has its one
// entry in the daemon's dispatch table, and the table serves nothing api
// does not declare, so a command cannot be half added.
func TestEveryCommandIsServed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../api/commands.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
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
			declared = append(declared, name)
		}
		return true
	})
	if len(declared) < 20 {
		t.Fatalf("found only %d commands in api/commands.go: the parse is wrong", len(declared))
	}
	served := (&Daemon{}).commands(func() {}).Names()
	slices.Sort(declared)
	if !slices.Equal(declared, served) {
		t.Errorf("api declares %s\nthe table serves %s", strings.Join(declared, " "), strings.Join(served, " "))
	}
}
