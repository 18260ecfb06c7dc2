package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/gitx/gitxtest"
)

func startIn(t testing.TB, root, home string) (*Daemon, error) {
	return Start(context.Background(), Options{Root: root, Environ: []string{"LAZY_HOME=" + home, "PATH=" + os.Getenv("PATH")}, SelfExe: "/bin/false"})
}

func TestSecondDaemonRefused(t *testing.T) {
	root := gitxtest.NewRepo(t, nil)
	home := t.TempDir()
	d, err := startIn(t, root, home)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Stop(); <-d.Done() }()
	if _, err := startIn(t, root, home); !errors.Is(err, ErrRunning) {
		t.Fatalf("second daemon: got %v, want ErrRunning", err)
	}
	if d.Info().DashboardPort == d.Info().ProxyPort {
		t.Fatal("dashboard and proxy share a port")
	}
	if _, err := os.Stat(filepath.Join(root, ".lazy", "daemon.json")); err == nil {
		t.Fatal("state written under the project root")
	}
}

// BenchmarkDaemonStartToReady measures Start (state dir, store migrations,
// reconciliation, actor tree, listeners, daemon.json) until the dashboard
// answers, then a graceful stop outside the timer.
func BenchmarkDaemonStartToReady(b *testing.B) {
	root := gitxtest.NewRepo(b, nil)
	home := b.TempDir()
	for i := 0; i < b.N; i++ {
		d, err := startIn(b, root, home)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := authGet(d, "/api/tasks")
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("not ready: %v", err)
		}
		resp.Body.Close()
		b.StopTimer()
		d.Stop()
		<-d.Done()
		b.StartTimer()
	}
}

func httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: time.Minute}
}

// authGet fetches a dashboard path with the daemon's auth token.
func authGet(d *Daemon, path string) (*http.Response, error) {
	tok, err := os.ReadFile(d.Paths().AuthToken)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, d.Info().BaseURL+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	return http.DefaultClient.Do(req)
}
