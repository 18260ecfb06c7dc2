package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/api"
)

// eventStream reads a task's event stream (GET /api/tasks/:task/events)
// into a list, and keeps the raw stream in the artifacts for the leak hunt.
type eventStream struct {
	mu     sync.Mutex
	raw    strings.Builder
	events []api.Event
	at     []time.Time
	body   io.Closer
	done   chan struct{}
}

func (p *project) streamEvents(ref string) *eventStream {
	p.t.Helper()
	resp, err := p.get("/api/tasks/" + ref + "/events")
	if err != nil {
		p.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		p.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &eventStream{body: resp.Body, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.raw.WriteString(line + "\n")
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var e api.Event
				if json.Unmarshal([]byte(data), &e) == nil {
					s.events = append(s.events, e)
					s.at = append(s.at, time.Now())
				}
			}
			s.mu.Unlock()
		}
	}()
	p.t.Cleanup(func() { resp.Body.Close(); <-s.done; p.keep("events-"+ref, s.text()) })
	return s
}

func (s *eventStream) text() string { s.mu.Lock(); defer s.mu.Unlock(); return s.raw.String() }

// waitFor waits until an event passes ok and returns its index.
func (s *eventStream) waitFor(t *testing.T, what string, ok func(api.Event) bool) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for i, e := range s.events {
			if ok(e) {
				s.mu.Unlock()
				return i
			}
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s event in the stream:\n%s", what, s.text())
	return -1
}

// TestLiveTranscriptStream (issue 29): a work turn's stream carries its
// start, a transcript event with the stub model's text while the turn still
// runs (the agent sleeps after its model call), then the turn's end and
// blocked, in that order; neither the real key nor a placeholder is in the
// stream, the page, or the stored transcript; the stream needs a login.
func TestLiveTranscriptStream(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "live", "-m", "@answer first")
	ti := p.waitStatus("live", "blocked")

	// no login: 401, no stream
	resp, err := http.Get(p.info().BaseURL + "/api/tasks/" + ti.ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("events without a login: %d, want 401", resp.StatusCode)
	}

	p.stub.Reply = func(string) string { return "the stub model says: watch me work" }
	s := p.streamEvents("live")
	p.lazy(0, "comment", "live", "-m", "watch me work\n@then-sleep 3s\n@answer second")
	start := s.waitFor(t, "turn_start", func(e api.Event) bool { return e.Kind == "turn_start" && e.Turn == 2 })
	text := s.waitFor(t, "transcript with the stub's text", func(e api.Event) bool {
		return e.Kind == api.EventTranscript && e.Transcript != nil && strings.Contains(e.Transcript.Text, "the stub model says: watch me work")
	})
	end := s.waitFor(t, "turn_end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 2 })
	blocked := s.waitFor(t, "blocked", func(e api.Event) bool { return e.Kind == "status" && e.Status == "blocked" })
	s.mu.Lock()
	early := s.at[end].Sub(s.at[text])
	tr := *s.events[text].Transcript
	s.mu.Unlock()
	t.Logf("stream order: turn_start #%d, transcript #%d (%q, turn %d call %d seq %d), turn_end #%d %v later, blocked #%d", start, text, tr.Text, tr.Turn, tr.Call, tr.Seq, end, early.Round(time.Millisecond), blocked)
	if !(start < text && text < end && end < blocked) {
		t.Fatalf("order: turn_start %d, transcript %d, turn_end %d, blocked %d:\n%s", start, text, end, blocked, s.text())
	}
	if early < time.Second || tr.Turn != 2 || tr.Call != 1 {
		t.Errorf("the transcript came %v before the turn's end (want it while the agent sleeps 3 s), part %+v", early, tr)
	}

	// the stored transcript, on the page after the turn ended
	page := p.page("/tasks/" + ti.ID)
	p.keep("task-live.html", page)
	if !strings.Contains(page, `id="turn-2-transcript"`) || !strings.Contains(page, "the stub model says: watch me work") {
		t.Errorf("the page lacks turn 2's kept transcript:\n%s", page)
	}
	// the CLI's view of it: lazy task transcript (the latest turn, then by number)
	out := p.lazy(0, "task", "transcript", "live")
	if !strings.Contains(out, "turn 2: 1 model call(s)") || !strings.Contains(out, "the stub model says: watch me work") {
		t.Errorf("lazy task transcript:\n%s", out)
	}
	if _, errOut, code := p.run("task", "transcript", "live", "--turn", "99"); code != 1 || !strings.Contains(errOut, "no transcript of turn 99") {
		t.Errorf("a turn with no transcript: exit %d, %q", code, errOut)
	}
	p.keep("task-transcript.txt", out)
	// who else can ask for it: a caller without the daemon's token (another
	// local user, a web page) gets 401 and no transcript
	res, err := http.Post(p.info().BaseURL+"/rpc/taskTranscript", "application/json", strings.NewReader(`{"task":"live"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "watch me work") {
		t.Errorf("taskTranscript without the token: %d %s", res.StatusCode, body)
	}
	stream := s.text()
	for _, leak := range []string{"REALSECRET", "svc-"} {
		if strings.Contains(stream, leak) || strings.Contains(page, leak) {
			t.Errorf("%q in the stream or the page", leak)
		}
	}
	db, err := os.ReadFile(p.paths.DB)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(p.paths.DB + "-wal") // WAL: the write may sit here
	db = append(db, wal...)
	if !strings.Contains(string(db), "the stub model says: watch me work") {
		t.Error("the store holds no transcript with the stub's text")
	}
	if strings.Contains(string(db), "REALSECRET") {
		t.Error("the store holds the real key")
	}
}
