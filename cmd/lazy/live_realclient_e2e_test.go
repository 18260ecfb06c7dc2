package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/api"
)

// waitForText waits until the transcript events of turn, their text put
// together in order, hold text (the stub streams its reply in pieces,
// which the daemon gathers into parts as they come) and returns the index
// of the event that completed it.
func (s *eventStream) waitForText(t *testing.T, turn int, text string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		var b strings.Builder
		for i, e := range s.events {
			if e.Kind == api.EventTranscript && e.Transcript != nil && e.Turn == turn {
				b.WriteString(e.Transcript.Text)
				if strings.Contains(b.String(), text) {
					s.mu.Unlock()
					return i
				}
			}
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no transcript of turn %d with %q in the stream:\n%s", turn, text, s.text())
	return -1
}

// TestLiveTranscriptRealClients (issues 28, 29): with codex and with the
// gemini CLI as the task's agent, in the default sandbox, a turn's event
// stream carries the stub model's text — read by the proxy from the OpenAI
// Responses and the Gemini route's replies, streamed in pieces — before
// the turn's end, and neither the real key nor a placeholder is in it.
func TestLiveTranscriptRealClients(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p *project) string // the real key
	}{
		{"codex", func(t *testing.T, p *project) string {
			codex := codexPath(t)
			// one origin carries one credential: the Anthropic primary
			// moves off the stub's, which is [proxy.openai]
			cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
			b, _ := os.ReadFile(cfgPath)
			if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(b), fmt.Sprintf("upstream = %q", p.upstream), `upstream = "http://127.0.0.1:9"`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			return p.useCodex(t, codex)
		}},
		{"gemini", func(t *testing.T, p *project) string {
			return p.useGemini(t, geminiPath(t), true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProject(t, "") // the default runner: bwrap
			real := tc.setup(t, p)
			p.lazy(0, "daemon", "start")
			p.lazy(0, "task", "new", "--code", "live", "-m", "remember the word PINEAPPLE")
			p.waitStatus("live", "blocked")

			say := "the stub model says: watch " + tc.name + " work"
			p.stub.Reply = func(prompt string) string { return say }
			p.stub.EventDelay = 50 * time.Millisecond // the reply streams in pieces over a while
			s := p.streamEvents("live")
			p.lazy(0, "comment", "live", "-m", "watch me work")
			start := s.waitFor(t, "turn_start", func(e api.Event) bool { return e.Kind == "turn_start" && e.Turn == 2 })
			text := s.waitForText(t, 2, say)
			end := s.waitFor(t, "turn_end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 2 })
			s.mu.Lock()
			parts := 0
			for _, e := range s.events[:text+1] {
				if e.Kind == api.EventTranscript && e.Turn == 2 {
					parts++
				}
			}
			early := s.at[end].Sub(s.at[text])
			s.mu.Unlock()
			t.Logf("%s: turn_start #%d, the stub's text complete at #%d (%d transcript parts), turn_end #%d %v later", tc.name, start, text, parts, end, early.Round(time.Millisecond))
			if !(start < text && text < end) {
				t.Fatalf("order: turn_start %d, transcript %d, turn_end %d:\n%s", start, text, end, s.text())
			}
			p.waitStatus("live", "blocked")
			stream := s.text()
			for _, leak := range []string{real, "svc-"} {
				if strings.Contains(stream, leak) {
					t.Errorf("%q in the event stream", leak)
				}
			}
			p.lazy(0, "daemon", "stop")
		})
	}
}
