package config

import (
	"net/url"
	"strings"
)

// Notify is who is told when a task needs the reviewer, failed or tripped
// a wire (CONTRACT §17): a POST of the notice's JSON to Webhook, and
// Command run with the JSON on its standard input. Either, both or none.
// Both are read at each notice, so a change of the file applies to the
// next one.
type Notify struct {
	// Webhook is an http(s) URL. It may hold the receiver's own secret (a
	// chat webhook's path does): logs name only its scheme and host.
	Webhook string `koanf:"webhook"`
	// Command is run without a shell when it is plain words (split on
	// spaces), with `sh -c` when it holds a character a shell gives meaning
	// to (quotes, $, |, ;, &, <, >, (, ), `, \, *, ?, [, ], #, ~, {, }).
	Command string `koanf:"command"`
}

// shellChars are the characters that make notify.command a shell command.
const shellChars = "\"'$|;&<>()`\\*?[]#~{}\n"

// CommandArgv is how notify.command runs: argv for exec, never a string
// built from anything else (the notice goes on standard input only).
func (n Notify) CommandArgv() []string {
	c := strings.TrimSpace(n.Command)
	if c == "" {
		return nil
	}
	if strings.ContainsAny(c, shellChars) {
		return []string{"sh", "-c", c}
	}
	return strings.Fields(c)
}

func (n Notify) validate() error {
	if n.Webhook != "" {
		u, err := url.Parse(n.Webhook)
		if err != nil {
			// url's error quotes the whole URL, which may hold the receiver's secret
			return bad("notify.webhook", "is not a URL; write it like https://hooks.example.com/lazy")
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return bad("notify.webhook", "scheme %q is not http or https: lazy only POSTs notices over HTTP; write it like https://hooks.example.com/lazy, or use notify.command for anything else", u.Scheme)
		}
		if u.Host == "" {
			return bad("notify.webhook", "names no host; write it like https://hooks.example.com/lazy")
		}
	}
	if strings.ContainsRune(n.Command, 0) {
		return bad("notify.command", "holds a NUL byte, which no command can")
	}
	if n.Command != "" && strings.TrimSpace(n.Command) == "" {
		return bad("notify.command", "is blank; remove it or write the command that takes the notice on its standard input")
	}
	return nil
}
