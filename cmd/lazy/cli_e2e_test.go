package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIAnswers: a mistyped subcommand is a usage error (2), not help and
// success; with --json a refusal is a JSON object on stdout (exit 1);
// accept refuses an empty reason; task show --json carries the turns.
func TestCLIAnswers(t *testing.T) {
	p := newProject(t, "process")
	for _, args := range [][]string{{"task", "lst"}, {"daemn", "start"}, {"lst"}} {
		if _, errOut, code := p.run(args...); code != 2 || !strings.Contains(errOut, "unknown command") {
			t.Errorf("lazy %v: exit %d, %s", args, code, errOut)
		}
	}
	if _, _, code := p.run("task"); code != 0 {
		t.Errorf("lazy task alone (help): exit %d", code)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "cli", "-m", writeAndCommit)
	p.waitStatus("cli", "blocked")
	out, _, code := p.run("accept", "cli", "--reason", " ", "--json")
	var refusal struct {
		Error string `json:"error"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &refusal) != nil || !strings.Contains(refusal.Error, "say why you accept") {
		t.Fatalf("accept with an empty reason: exit %d, %q", code, out)
	}
	if st := p.show("cli").Status; st != "blocked" {
		t.Fatalf("an accept with no reason merged: %s", st)
	}
	out, _, code = p.run("task", "show", "nope", "--json")
	if code != 1 || json.Unmarshal([]byte(out), &refusal) != nil || refusal.Error == "" {
		t.Fatalf("a refusal with --json: exit %d, %q", code, out)
	}
	var shown struct {
		Turns       int `json:"turns"`
		TurnRecords []struct {
			Number int    `json:"number"`
			Status string `json:"status"`
		} `json:"turn_records"`
	}
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "show", "cli", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Turns != 1 || len(shown.TurnRecords) != 1 || shown.TurnRecords[0].Number != 1 {
		t.Fatalf("task show --json: %+v", shown)
	}
}
