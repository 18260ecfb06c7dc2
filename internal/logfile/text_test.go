package logfile

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

// textBoth logs r through NewText and through slog's TextHandler and
// returns both outputs.
func textBoth(t *testing.T, opts *slog.HandlerOptions, log func(h slog.Handler)) (ours, slogs string) {
	t.Helper()
	var a, b bytes.Buffer
	log(NewText(&a, opts))
	log(slog.NewTextHandler(&b, opts))
	return a.String(), b.String()
}

func TestTextAsSlog(t *testing.T) {
	at := time.Date(2026, 11, 26, 7, 5, 9, 123987654, time.UTC)
	east := time.FixedZone("east", 5*3600+30*60)
	msgs := []string{
		"net> 2026-11-26T07:05:09Z fix-login default POST /v1/messages?beta=true -> 200 127.0.0.1:4000 3ms",
		"plain", "", "a=b", `say "hi"`, `back\slash`, `back\slash and space`, "tab\there", "new\nline",
		"é accent", "\x7f", "~!@#$%^&*()_+{}|:<>?", "\xff bad utf-8",
	}
	for _, msg := range msgs {
		for _, when := range []time.Time{at, at.In(east), {}, time.Unix(0, 999999)} {
			for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelDebug, slog.LevelInfo + 2} {
				ours, slogs := textBoth(t, &slog.HandlerOptions{Level: slog.LevelDebug}, func(h slog.Handler) {
					_ = h.Handle(context.Background(), slog.NewRecord(when, level, msg, 0))
				})
				if ours != slogs {
					t.Errorf("%q at %v, %v:\n ours %q\nslog's %q", msg, when, level, ours, slogs)
				}
			}
		}
	}
	// attributes, a logger's own attributes and groups: slog's way, same bytes
	ours, slogs := textBoth(t, nil, func(h slog.Handler) {
		l := slog.New(h)
		l.Info("with attrs", "k", "v v", "n", 3)
		l.With("component", "proxy").Info("net> a line")
		l.WithGroup("g").Info("grouped", "x", 1)
		l.Debug("under the level") // not written
	})
	if ours != stripTimes(slogs, ours) {
		t.Errorf("attrs:\n ours %q\nslog's %q", ours, slogs)
	}
	if !bytes.Contains([]byte(ours), []byte(`component=proxy`)) || bytes.Contains([]byte(ours), []byte("under the level")) {
		t.Errorf("a derived logger or the level was not kept: %q", ours)
	}
}

// stripTimes is slogs with each line's time taken from ours (the records
// logged through a Logger carry the time of their call).
func stripTimes(slogs, ours string) string {
	sl, ol := bytes.Split([]byte(slogs), []byte("\n")), bytes.Split([]byte(ours), []byte("\n"))
	if len(sl) != len(ol) {
		return slogs
	}
	for i := range sl {
		if len(sl[i]) > 29 && len(ol[i]) > 29 {
			copy(sl[i][:29], ol[i][:29])
		}
	}
	return string(bytes.Join(sl, []byte("\n")))
}

func FuzzTextAsSlog(f *testing.F) {
	f.Add("net> 2026-11-26T07:05:09Z t r POST /v1/messages -> 200 h 1ms", int64(1764140709123987654), 0)
	f.Add(`"=\ `, int64(0), 4)
	f.Add("\x00é\u2028", int64(-1), -4)
	f.Fuzz(func(t *testing.T, msg string, nanos int64, level int) {
		when := time.Unix(0, nanos).UTC()
		if nanos == 0 {
			when = time.Time{}
		}
		ours, slogs := textBoth(t, &slog.HandlerOptions{Level: slog.Level(-100)}, func(h slog.Handler) {
			_ = h.Handle(context.Background(), slog.NewRecord(when, slog.Level(level), msg, 0))
		})
		if ours != slogs {
			t.Fatalf("%q:\n ours %q\nslog's %q", msg, ours, slogs)
		}
	})
}
