package grain

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
)

// otherActors are the messages of messages.go that the grants actor and
// the traffic hub take: they stay in their member. A new one is added here
// (or registered, when it is the task actor's).
var otherActors = map[string]bool{"MintGrants": true, "MintVar": true, "Minted": true, "RevokeTask": true,
	"Subscribe": true, "Unsubscribe": true, "Publish": true}

// TestEveryTaskMessageIsRegistered: each exported message and reply of
// actors/messages.go is in the registry, unless it is another actor's
// (otherActors) or its comment says it is local only. A message missing
// here would fail only at run time, only in a cluster.
func TestEveryTaskMessageIsRegistered(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../actors/messages.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, sp := range gd.Specs {
			ts := sp.(*ast.TypeSpec)
			if _, isStruct := ts.Type.(*ast.StructType); !isStruct || !ts.Name.IsExported() || otherActors[ts.Name.Name] {
				continue
			}
			if strings.Contains(gd.Doc.Text()+ts.Doc.Text(), "Local only") {
				continue
			}
			want = append(want, ts.Name.Name)
		}
	}
	if len(want) < 15 {
		t.Fatalf("found only %d task messages in actors/messages.go: the parse is wrong", len(want))
	}
	registered := map[string]bool{}
	for ty := range byType {
		if ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		if ty.PkgPath() == "lazy/actors" {
			registered[ty.Name()] = true
		}
	}
	for _, name := range want {
		if !registered[name] {
			t.Errorf("actors.%s is not in package grain's registry (codec.go init): register it, or say \"Local only\" in its comment if it never crosses members", name)
		}
	}
}
