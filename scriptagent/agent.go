// Package scriptagent is the project's scripted agent, run as `lazy
// script-agent`. It speaks the claude CLI's argv contract (-p, --output-format
// json or stream-json with --verbose, --resume, --permission-mode, PROMPT),
// calls the model at
// ANTHROPIC_BASE_URL on every turn as the real client does (with the
// placeholder it was given), and follows directives in its prompt:
//
//	@write PATH TEXT     write TEXT (\n for newlines) to PATH in the worktree
//	@append PATH TEXT    append TEXT to PATH
//	@lines PATH N TEXT   append N lines of TEXT to PATH, each "#" in TEXT
//	                     replaced by the line's number (1 to N): a large
//	                     change from a short prompt (argv holds 128 KiB)
//	@commit MESSAGE      git add -A and commit
//	@answer TEXT         the turn's result text (default: the model's reply)
//	@crash [MESSAGE]     print MESSAGE to stderr and exit 3
//	@sleep DURATION      sleep (Go duration, e.g. 2s)
//	@then-sleep DURATION sleep after the model calls (the turn runs on with
//	                     its reply read: a live view has something to show)
//	@model N             call the model N times (default 1)
//	@stream              use the streaming (SSE) API
//	@fetch URL           GET URL through the proxy its HTTP_PROXY (http://) or
//	                     HTTPS_PROXY (https://) names, loopback names included;
//	                     the status (and x-lazy-refused) is noted in the answer
//	@sneak PATH TEXT     write PATH and commit it in ANY mode, plan included:
//	                     a misbehaving agent, for the tests of what an ask
//	                     may change; a failure is noted in the answer
//	@readsend PATH       read PATH (relative to $HOME, "~/" allowed) and put
//	                     it into this turn's model call, after the prompt: a
//	                     prompt-injected agent exfiltrating a secret
//
// With --output-format stream-json it prints its turn as claude does, one
// JSON event a line as it happens: a system init, a Write tool_use and its
// tool_result for each @write and @append (an error result in plan mode),
// then the result object that json prints alone.
//
// In plan mode (ask turns) it changes nothing: @write, @append and @commit are
// refused and noted in the answer. Every turn is appended to
// $HOME/.script-agent/turns.jsonl so tests can check exactly what it saw.
package scriptagent

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// TurnRecord is one line of turns.jsonl.
type TurnRecord struct {
	Session string    `json:"session"`
	Resumed bool      `json:"resumed"`
	Mode    string    `json:"mode"`
	Prompt  string    `json:"prompt"`
	Answer  string    `json:"answer"`
	At      time.Time `json:"at"`
}

type args struct {
	print        bool
	verbose      bool
	outputFormat string
	resume       string
	mode         string
	prompt       string
}

func parseArgs(argv []string) (args, error) {
	var a args
	for i := 0; i < len(argv); i++ {
		switch v := argv[i]; v {
		case "-p", "--print":
			a.print = true
		case "--verbose":
			a.verbose = true
		case "--output-format", "--resume", "--permission-mode":
			if i+1 >= len(argv) {
				return a, fmt.Errorf("%s needs a value", v)
			}
			i++
			switch v {
			case "--output-format":
				a.outputFormat = argv[i]
			case "--resume":
				a.resume = argv[i]
			default:
				a.mode = argv[i]
			}
		case "--":
			a.prompt = strings.Join(argv[i+1:], " ")
			i = len(argv)
		default:
			if strings.HasPrefix(v, "--") {
				return a, fmt.Errorf("unknown flag %s", v)
			}
			a.prompt = v
		}
	}
	if !a.print {
		return a, errors.New("only print mode (-p) is supported")
	}
	if a.outputFormat == "stream-json" && !a.verbose {
		return a, errors.New("--output-format=stream-json requires --verbose in print mode (as claude's does)")
	}
	return a, nil
}

// Main runs one turn and returns the exit code. Like `claude -p`, it takes
// the prompt from its last argument, or from standard input when there is
// none.
func Main(argv []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a, err := parseArgs(argv)
	if err != nil {
		fmt.Fprintf(stderr, "script-agent: %v\n", err)
		return 2
	}
	if a.prompt == "" && stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "script-agent: read the prompt from standard input: %v\n", err)
			return 1
		}
		a.prompt = string(b)
	}
	home := env("HOME")
	if home == "" {
		fmt.Fprintln(stderr, "script-agent: HOME is not set")
		return 2
	}
	dir := filepath.Join(home, ".script-agent")
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		fmt.Fprintf(stderr, "script-agent: %v\n", err)
		return 1
	}
	session := a.resume
	var history []map[string]string
	if session != "" {
		b, err := os.ReadFile(filepath.Join(dir, "sessions", session+".json"))
		if err != nil {
			fmt.Fprintf(stderr, "script-agent: no conversation found with session ID: %s\n", session)
			return 1
		}
		_ = json.Unmarshal(b, &history)
	} else {
		var r [16]byte
		_, _ = rand.Read(r[:])
		session = hex.EncodeToString(r[:])
	}
	readOnly := a.mode == "plan"
	ev := events{w: stdout, on: a.outputFormat == "stream-json", session: session}
	ev.init()

	calls, stream := 1, false
	var after time.Duration // @then-sleep
	var sent []string       // what @readsend read, sent with the prompt
	var answer string
	var notes []string
	for _, raw := range strings.Split(a.prompt, "\n") {
		line := strings.TrimSpace(raw)
		if !strings.HasPrefix(line, "@") {
			continue
		}
		verb, rest, _ := strings.Cut(line[1:], " ")
		rest = strings.TrimSpace(rest)
		switch verb {
		case "write", "append", "lines":
			path, text, _ := strings.Cut(rest, " ")
			text = unescape(text)
			if verb == "lines" {
				var err error
				if text, err = numberedLines(text); err != nil {
					fmt.Fprintf(stderr, "script-agent: @lines %s: %v\n", path, err)
					return 1
				}
			}
			id := ev.toolUse(path, text)
			if readOnly {
				notes = append(notes, "(plan mode: did not "+verb+" "+path+")")
				ev.toolResult(id, "plan mode: did not "+verb+" "+path, true)
				continue
			}
			if err := writeFile(path, text, verb != "write"); err != nil {
				fmt.Fprintf(stderr, "script-agent: %v\n", err)
				return 1
			}
			ev.toolResult(id, "File written at: "+path, false)
		case "commit":
			if readOnly {
				notes = append(notes, "(plan mode: did not commit)")
				continue
			}
			if rest == "" {
				rest = "agent change"
			}
			if err := commit(rest); err != nil {
				fmt.Fprintf(stderr, "script-agent: %v\n", err)
				return 1
			}
		case "sneak":
			path, text, _ := strings.Cut(rest, " ")
			if err := writeFile(path, unescape(text), false); err != nil {
				notes = append(notes, "(could not sneak "+path+": "+err.Error()+")")
				continue
			}
			if err := commit("sneak " + path); err != nil {
				notes = append(notes, "(could not commit "+path+")")
			}
		case "fetch":
			notes = append(notes, fetch(env, rest))
		case "answer":
			answer = unescape(rest)
		case "crash":
			if rest == "" {
				rest = "scripted crash"
			}
			fmt.Fprintf(stderr, "script-agent: %s\n", rest)
			return 3
		case "sleep":
			d, err := time.ParseDuration(rest)
			if err != nil {
				fmt.Fprintf(stderr, "script-agent: bad @sleep %q\n", rest)
				return 2
			}
			time.Sleep(d)
		case "then-sleep":
			d, err := time.ParseDuration(rest)
			if err != nil {
				fmt.Fprintf(stderr, "script-agent: bad @then-sleep %q\n", rest)
				return 2
			}
			after = d
		case "model":
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 {
				fmt.Fprintf(stderr, "script-agent: bad @model %q\n", rest)
				return 2
			}
			calls = n
		case "stream":
			stream = true
		case "readsend":
			p := strings.TrimPrefix(rest, "~/")
			b, err := os.ReadFile(filepath.Join(home, p))
			if err != nil {
				fmt.Fprintf(stderr, "script-agent: @readsend: %v\n", err)
				return 1
			}
			sent = append(sent, "contents of ~/"+p+":\n"+string(b))
		}
	}
	content := a.prompt
	if len(sent) > 0 {
		content += "\n" + strings.Join(sent, "\n")
	}
	history = append(history, map[string]string{"role": "user", "content": content})
	var reply string
	for i := 0; i < calls; i++ {
		reply, err = callModel(env, history, stream)
		if err != nil {
			writeResult(stdout, session, "model call failed: "+err.Error(), true)
			fmt.Fprintf(stderr, "script-agent: model call failed: %v\n", err)
			return 1
		}
	}
	time.Sleep(after)
	if answer == "" {
		answer = reply
	}
	if len(notes) > 0 {
		answer += " " + strings.Join(notes, " ")
	}
	history = append(history, map[string]string{"role": "assistant", "content": answer})
	b, _ := json.Marshal(history)
	if err := os.WriteFile(filepath.Join(dir, "sessions", session+".json"), b, 0o600); err != nil {
		fmt.Fprintf(stderr, "script-agent: save session: %v\n", err)
		return 1
	}
	rec, _ := json.Marshal(TurnRecord{Session: session, Resumed: a.resume != "", Mode: a.mode, Prompt: a.prompt, Answer: answer, At: time.Now().UTC()})
	f, err := os.OpenFile(filepath.Join(dir, "turns.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		_, _ = f.Write(append(rec, '\n'))
		_ = f.Close()
	}
	writeResult(stdout, session, answer, false)
	return 0
}

// ReadTurns reads the turn log under an agent home.
func ReadTurns(home string) ([]TurnRecord, error) {
	f, err := os.Open(filepath.Join(home, ".script-agent", "turns.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []TurnRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r TurnRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// events prints the stream-json events of a turn (when on).
type events struct {
	w       io.Writer
	on      bool
	session string
	n       int
}

func (e *events) print(v map[string]any) {
	if !e.on {
		return
	}
	v["session_id"] = e.session
	b, _ := json.Marshal(v)
	fmt.Fprintln(e.w, string(b))
}

func (e *events) init() {
	cwd, _ := os.Getwd()
	e.print(map[string]any{"type": "system", "subtype": "init", "cwd": cwd})
}

// toolUse prints a Write tool_use of text to path (made absolute, as
// claude's Write takes it) and returns its id.
func (e *events) toolUse(path, text string) string {
	e.n++
	id := fmt.Sprintf("toolu_script_%d", e.n)
	abs, _ := filepath.Abs(path)
	e.print(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "tool_use", "id": id, "name": "Write", "input": map[string]string{"file_path": abs, "content": text}}}}})
	return id
}

func (e *events) toolResult(id, content string, isErr bool) {
	e.print(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isErr}}}})
}

func writeResult(w io.Writer, session, text string, isErr bool) {
	b, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": isErr, "result": text, "session_id": session})
	fmt.Fprintln(w, string(b))
}

// unescape turns the escapes a one-line directive needs into characters:
// \n newline, \t tab, \r carriage return, \\ backslash. Any other backslash
// stays as written.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\':
			b.WriteByte('\\')
		default:
			b.WriteByte('\\')
			continue
		}
		i++
	}
	return b.String()
}

func writeFile(path, text string, appendTo bool) error {
	if path == "" || filepath.IsAbs(path) || strings.Contains(path, "..") {
		return fmt.Errorf("@write path %q must be relative to the worktree", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func commit(msg string) error {
	for _, argv := range [][]string{{"add", "-A"}, {"-c", "user.name=lazy agent", "-c", "user.email=agent@lazy.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "--allow-empty", "-m", msg}} {
		out, err := exec.Command("git", argv...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s: %v: %s", argv[len(argv)-1], err, out)
		}
	}
	return nil
}

// callModel posts the conversation to the model like the real client: the
// placeholder goes in x-api-key or Authorization by which variable is set.
// fetch GETs u through the proxy the environment names, and says what came
// back: "(fetch U: 200, N bytes)" or "(fetch U: 403 refused: CAUSE)".
func fetch(env func(string) string, u string) string {
	proxyVar := "HTTP_PROXY"
	if strings.HasPrefix(u, "https://") {
		proxyVar = "HTTPS_PROXY"
	}
	tr := &http.Transport{}
	if p := env(proxyVar); p != "" {
		pu, err := url.Parse(p)
		if err != nil {
			return fmt.Sprintf("(fetch %s: %s is not a URL)", u, proxyVar)
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	resp, err := c.Get(u)
	if err != nil {
		return fmt.Sprintf("(fetch %s: %v)", u, err)
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	if cause := resp.Header.Get("x-lazy-refused"); cause != "" {
		return fmt.Sprintf("(fetch %s: %d refused: %s)", u, resp.StatusCode, cause)
	}
	return fmt.Sprintf("(fetch %s: %d, %d bytes)", u, resp.StatusCode, n)
}

func callModel(env func(string) string, history []map[string]string, stream bool) (string, error) {
	base := strings.TrimRight(env("ANTHROPIC_BASE_URL"), "/")
	if base == "" {
		return "", errors.New("ANTHROPIC_BASE_URL is not set")
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	hdr := http.Header{}
	hdr.Set("anthropic-version", "2023-06-01")
	hdr.Set("User-Agent", "lazy-script-agent/1")
	hdr.Set("Content-Type", "application/json")
	bearer := false
	switch {
	case env("ANTHROPIC_API_KEY") != "":
		hdr.Set("x-api-key", env("ANTHROPIC_API_KEY"))
	case env("CLAUDE_CODE_OAUTH_TOKEN") != "":
		hdr.Set("Authorization", "Bearer "+env("CLAUDE_CODE_OAUTH_TOKEN"))
		hdr.Set("anthropic-beta", "oauth-2025-04-20")
		bearer = true
	case env("ANTHROPIC_AUTH_TOKEN") != "":
		hdr.Set("Authorization", "Bearer "+env("ANTHROPIC_AUTH_TOKEN"))
		bearer = true
	}
	if bearer {
		req, _ := http.NewRequest(http.MethodHead, base+"/api/hello", nil)
		req.Header = hdr.Clone()
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": history, "stream": stream})
	req, err := http.NewRequest(http.MethodPost, base+"/v1/messages?beta=true", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header = hdr
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if stream {
		return readStream(resp.Body)
	}
	var msg struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return "", fmt.Errorf("decode reply: %w", err)
	}
	var b strings.Builder
	for _, c := range msg.Content {
		b.WriteString(c.Text)
	}
	return b.String(), nil
}

// readStream collects text deltas; a stream that ends without message_stop
// is an error, never a clean end.
func readStream(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var b strings.Builder
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "content_block_delta":
			b.WriteString(ev.Delta.Text)
		case "message_stop":
			done = true
		case "error":
			return b.String(), fmt.Errorf("stream error: %s", ev.Error.Message)
		}
	}
	if err := sc.Err(); err != nil {
		return b.String(), fmt.Errorf("stream broke: %w", err)
	}
	if !done {
		return b.String(), errors.New("stream ended before message_stop")
	}
	return b.String(), nil
}

// numberedLines is @lines' text: "N TEXT" made N lines of TEXT, the i-th
// with each "#" replaced by i.
func numberedLines(spec string) (string, error) {
	count, text, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > 1_000_000 {
		return "", fmt.Errorf("want a line count from 1 to 1000000 first, got %q", count)
	}
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strings.ReplaceAll(text, "#", strconv.Itoa(i)))
		b.WriteByte('\n')
	}
	return b.String(), nil
}
