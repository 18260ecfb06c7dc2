package proxy

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"lazy/api"
)

// lineCounter is a log handler at one level that keeps what it was handed.
type lineCounter struct {
	level slog.Level
	lines []string
}

func (h *lineCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *lineCounter) Handle(_ context.Context, r slog.Record) error {
	h.lines = append(h.lines, r.Message)
	return nil
}
func (h *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineCounter) WithGroup(string) slog.Handler      { return h }

// TestTrafficLineAtItsLevel: the traffic line is built and handed to the
// log only when the log takes its level (a daemon logging at warn builds
// none for a call at info).
func TestTrafficLineAtItsLevel(t *testing.T) {
	tr := &api.Traffic{Time: time.Unix(1, 0).UTC(), Method: "POST", Path: "/v1/messages", Status: 200, TaskRef: "t1", Role: "default"}
	warn := &lineCounter{level: slog.LevelWarn}
	p := &Proxy{log: slog.New(warn)}
	p.logTraffic(context.Background(), slog.LevelInfo, tr)
	if len(warn.lines) != 0 {
		t.Fatalf("a log at warn was handed a call's line at info: %q", warn.lines)
	}
	if allocs := testing.AllocsPerRun(100, func() { p.logTraffic(context.Background(), slog.LevelInfo, tr) }); allocs != 0 && !raceOn {
		t.Errorf("a line the log does not take cost %.0f allocations: it was built", allocs)
	}
	info := &lineCounter{level: slog.LevelInfo}
	p = &Proxy{log: slog.New(info)}
	p.logTraffic(context.Background(), slog.LevelInfo, tr)
	if len(info.lines) != 1 || !strings.Contains(info.lines[0], "/v1/messages") {
		t.Fatalf("a log at info got %q, want the call's one traffic line", info.lines)
	}
}
