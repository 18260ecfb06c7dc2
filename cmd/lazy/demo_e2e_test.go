package main

import (
	"bufio"
	"encoding/json"
	"lazy/api"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoWithLazyHomeSet: a user with LAZY_HOME set (and no credential in
// it) runs the demo: it uses a throwaway home of its own, its Go code passes
// go vet, the CLI line it prints works, and Ctrl-C leaves nothing behind —
// neither in the user's LAZY_HOME nor in the temp dir.
func TestDemoWithLazyHomeSet(t *testing.T) {
	userHome := t.TempDir()
	cmd := exec.Command(lazyBin, "demo")
	cmd.Env = append(os.Environ(), "LAZY_HOME="+userHome, "LAZY_AGENT__RUNNER=docker")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var base string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "demo: throwaway project at "); ok {
				base = strings.TrimSuffix(p, "/project")
			}
		}
	}()
	var cli string
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "cli: "); ok {
			cli = l
			break
		}
	}
	if cli == "" {
		t.Fatal("the demo printed no CLI line (did it fail?)")
	}
	// cli: LAZY_HOME=<home> lazy --project <root> task list
	f := strings.Fields(cli)
	if len(f) != 6 || !strings.HasPrefix(f[0], "LAZY_HOME=") || f[1] != "lazy" || f[2] != "--project" {
		t.Fatalf("cli line: %q", cli)
	}
	env := append(os.Environ(), f[0])
	run := func(args ...string) string {
		c := exec.Command(lazyBin, append(args, "--project", f[3])...)
		c.Env = env
		out, err := c.Output()
		if err != nil {
			t.Fatalf("lazy %v: %v", args, err)
		}
		return string(out)
	}
	if out := run("task", "list"); !strings.Contains(out, "greeting") || !strings.Contains(out, "readme") {
		t.Fatalf("task list through the printed line: %s", out)
	}
	var ti api.TaskInfo
	if err := json.Unmarshal([]byte(run("task", "show", "greeting", "--json")), &ti); err != nil {
		t.Fatal(err)
	}
	vet := exec.Command("go", "vet", "./...")
	vet.Dir = ti.Worktree
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("the demo's Go code does not vet: %v\n%s", err, out)
	}
	// Ctrl-C
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the demo after Ctrl-C: %v", err)
	}
	if entries, _ := os.ReadDir(userHome); len(entries) != 0 {
		t.Errorf("the demo wrote into the user's LAZY_HOME: %v", entries)
	}
	if base == "" {
		t.Fatal("the demo did not say where its throwaway project was")
	}
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("the demo left %s behind: %v", base, err)
	}
}
