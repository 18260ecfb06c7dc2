package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEventKindsDeclared: every EventKind constant is in EventKinds, once.
func TestEventKindsDeclared(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []EventKind
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "EventKind" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				declared = append(declared, EventKind(strings.Trim(lit.Value, `"`)))
			}
		}
	}
	listed := EventKinds()
	if !sameKinds(declared, listed) {
		t.Errorf("EventKind constants %v, EventKinds() %v: add the new kind to EventKinds", declared, listed)
	}
}

// TestEventKindsDocumented: docs/GUIDE.md's table of watch events lists
// exactly EventKinds, in its order.
func TestEventKindsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/GUIDE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "<!-- event kinds:")
	end := strings.Index(doc, "<!-- end of event kinds -->")
	if start < 0 || end < start {
		t.Fatal("docs/GUIDE.md has no table of event kinds between <!-- event kinds: ... --> and <!-- end of event kinds -->")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	var documented []EventKind
	for _, m := range row.FindAllStringSubmatch(doc[start:end], -1) {
		documented = append(documented, EventKind(m[1]))
	}
	if !slices.Equal(documented, EventKinds()) {
		t.Errorf("docs/GUIDE.md \"Watch events\" lists %v, the code's EventKinds() are %v: one row per kind, in that order", documented, EventKinds())
	}
}

// TestEventKindsTyped: no code outside tests builds an api.Event with a
// bare string kind, so every kind emitted is one of EventKinds.
func TestEventKindsTyped(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isEventType(cl.Type, f.Name.Name) {
				return true
			}
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Kind" {
					if _, lit := kv.Value.(*ast.BasicLit); lit {
						bad = append(bad, fset.Position(kv.Pos()).String())
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("events built with a bare string kind (declare an api.EventKind constant, list it in EventKinds and docs/GUIDE.md): %v", bad)
	}
}

func isEventType(e ast.Expr, pkg string) bool {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == "api" && x.Sel.Name == "Event"
	case *ast.Ident:
		return pkg == "api" && x.Name == "Event"
	}
	return false
}

func sameKinds(a, b []EventKind) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) && len(slices.Compact(a)) == len(b)
}
