package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lazy/config"
	"lazy/proxy"
	"lazy/store"
	"lazy/task"
)

// budgetRig is the daemon's usage book behind a real proxy listener, wired
// as the daemon wires them, in front of a loopback upstream.
type budgetRig struct {
	st     store.Store
	book   *usageBook
	url    string // the proxy
	taskID string
	ph     string
}

func newBudgetRig(t *testing.T, budget int64, upstream http.Handler) *budgetRig {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	dir := t.TempDir()
	st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	code := "b"
	tk := &store.Task{ID: task.NewID(now), Code: &code, Status: task.Running, Branch: "lazy/b", Parent: "main", BudgetTokens: budget, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateTask(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte("sk-ant-api03-REALBUDGETKEY-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess // the TCP listener
	cfg.Proxy.Upstream, cfg.Proxy.Credential = up.URL, "provider"
	ph := proxy.NewPlaceholder("api_key", "")
	grants := &atomic.Pointer[proxy.Grants]{}
	grants.Store(&proxy.Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: tk.ID, EnvVar: "ANTHROPIC_API_KEY", CreatedAt: now}})
	book := newUsageBook(st, slog.New(slog.DiscardHandler), 0)
	t.Cleanup(book.close)
	p, err := proxy.New(proxy.Options{Config: &cfg, Home: home, Grants: grants, Publish: book.record, OverBudget: book.overBudget, Reserve: book.reserve})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return &budgetRig{st: st, book: book, url: srv.URL, taskID: tk.ID, ph: ph}
}

// call sends one model call; ctx may cut it.
func (r *budgetRig) call(ctx context.Context, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", r.url+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", r.ph)
	return http.DefaultClient.Do(req)
}

// settled waits until the book and the store have n calls of the task
// (each call's traffic event is recorded after its reply ended, in the
// book and then in a row) and returns the task's usage and holds.
func (r *budgetRig) settled(t *testing.T, n int64) (charged, in, out, held int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		total, _, _ := r.book.of(context.Background(), r.taskID)
		rows, err := r.st.ListUsage(context.Background(), r.taskID)
		if err != nil {
			t.Fatal(err)
		}
		var stored int64 // a row counts the calls of its batch
		for _, c := range rows {
			stored += c.Calls()
		}
		if total.Requests >= n && stored >= n {
			r.book.mu.Lock()
			u, _ := r.book.tasks.Load(r.taskID)
			held = u.(*taskUsage).held
			r.book.mu.Unlock()
			return total.ChargedTokens, total.InputTokens, total.OutputTokens, held
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls recorded", total.Requests, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// upstreamCost is what the upstream below says a call cost: a quarter of
// its body's bytes in, and all of max_tokens out.
func upstreamCost(body []byte) (in, out int64) {
	var req struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	_ = json.Unmarshal(body, &req)
	return int64(len(body) / 4), req.MaxTokens
}

// TestConcurrentCallsHoldTheBudget: 30 calls at once on a budget of a few
// calls: those let through are all on their way together (the upstream
// holds each until every call was either let through or refused), and
// together they spend at most the budget and one call's hold. The refused
// ones get 429 budget_exceeded in the provider's error shape. Every hold is
// given back, and the store's rows say what the upstream said.
func TestConcurrentCallsHoldTheBudget(t *testing.T) {
	const calls, budget = 30, 5000
	body := `{"model":"m","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	hold := int64((len(body)+3)/4) + 1000 // what the proxy holds for one call
	var arrived, refused atomic.Int64
	release := make(chan struct{})
	r := newBudgetRig(t, budget, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		arrived.Add(1)
		<-release
		in, out := upstreamCost(b)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"message","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":%d,"output_tokens":%d}}`, in, out)
	}))
	var wg sync.WaitGroup
	statuses := make(chan int, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := r.call(context.Background(), body)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				if !strings.Contains(string(b), `"type":"rate_limit_error"`) || !strings.Contains(string(b), `"cause":"budget_exceeded"`) {
					t.Errorf("a refusal not in the provider's error shape: %s", b)
				}
				refused.Add(1)
			}
			statuses <- resp.StatusCode
		}()
	}
	for arrived.Load()+refused.Load() < calls {
		time.Sleep(2 * time.Millisecond) // every call let through is at the upstream, or refused
	}
	close(release)
	wg.Wait()
	close(statuses)
	ok := 0
	for s := range statuses {
		if s == 200 {
			ok++
		}
	}
	charged, in, out, held := r.settled(t, calls)
	t.Logf("%d calls on a %d-token budget: %d let through together, %d refused; %d tokens spent (%d in / %d out); one call's hold %d", calls, budget, ok, refused.Load(), charged, in, out, hold)
	if charged > budget+hold {
		t.Fatalf("%d tokens spent on a budget of %d: more than one call's hold (%d) over", charged, budget, hold)
	}
	if ok < 2 || int64(ok) != arrived.Load() {
		t.Fatalf("%d calls answered, %d reached the upstream: want several, all let through together", ok, arrived.Load())
	}
	if held != 0 {
		t.Errorf("%d tokens still held after every call ended", held)
	}
	rows, err := r.st.ListUsage(context.Background(), r.taskID)
	if err != nil {
		t.Fatal(err)
	}
	var rowCalls, rowIn, rowOut int64
	for _, c := range rows {
		rowCalls, rowIn, rowOut = rowCalls+c.Calls(), rowIn+c.InputTokens, rowOut+c.OutputTokens
		if c.ChargedTokens != 0 {
			t.Errorf("a call read to its end is charged what it cost, no more: %+v", c)
		}
	}
	if rowCalls != calls || rowIn != in || rowOut != out {
		t.Errorf("store rows: %d calls, %d in / %d out; book: %d in / %d out", rowCalls, rowIn, rowOut, in, out)
	}
}

// TestCutStreamChargedItsHold: a client that hangs up after message_start
// (input 10, output 1 so far) is charged what the proxy held for the call
// (max_tokens + body/4), not the 11 tokens seen; the row keeps what the
// upstream said and the charge beside it, and a book loaded again from the
// store counts the same. A stream read to its end is charged its usage.
func TestCutStreamChargedItsHold(t *testing.T) {
	body := `{"model":"m","max_tokens":5000,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	hold := int64((len(body)+3)/4) + 5000
	gone := make(chan struct{})
	r := newBudgetRig(t, 1_000_000, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
		fl.Flush()
		if req.Header.Get("x-cut") != "" {
			<-req.Context().Done() // the proxy hung up: the client did
			close(gone)
			return
		}
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\nevent: message_stop\ndata: {}\n\n")
	}))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", r.url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", r.ph)
	req.Header.Set("x-cut", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q", line)
	}
	cancel() // hang up before the final message_delta
	resp.Body.Close()
	<-gone
	charged, in, out, held := r.settled(t, 1)
	t.Logf("cut stream: seen %d in / %d out, charged %d, hold %d", in, out, charged, hold)
	if charged < hold || in != 10 || out != 1 || held != 0 {
		t.Fatalf("cut stream: charged %d (want at least the hold %d), seen %d in / %d out, still held %d", charged, hold, in, out, held)
	}
	rows, _ := r.st.ListUsage(context.Background(), r.taskID)
	if len(rows) != 1 || rows[0].InputTokens != 10 || rows[0].OutputTokens != 1 || rows[0].ChargedTokens != hold {
		t.Fatalf("the row must keep what the upstream said and the charge: %+v", rows)
	}
	again := newUsageBook(r.st, slog.New(slog.DiscardHandler), 0)
	defer again.close()
	if total, _, _ := again.of(context.Background(), r.taskID); total.ChargedTokens != charged {
		t.Fatalf("loaded again from the store: charged %d, want %d", total.ChargedTokens, charged)
	}

	// read to its end: charged what the upstream said, 10 in + 42 out
	resp, err = r.call(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	charged2, _, _, held := r.settled(t, 2)
	if charged2-charged != 52 || held != 0 {
		t.Fatalf("a whole stream: charged %d, want 52; still held %d", charged2-charged, held)
	}
}
