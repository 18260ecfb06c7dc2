package logfile

import (
	"bytes"
	"context"
	"io"
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
	f.Add("net> 2026-11-26T07:05:09Z t r POST /v1/messages -> 200 h 1ms", int64(1764140709123987654), 0, 0)
	f.Add(`"=\ `, int64(0), 4, 3600)
	f.Add("\x00é\u2028", int64(-1), -4, -34200)
	f.Add("x", int64(-62135596800000000), 0, 61) // year 1, a zone of seconds
	f.Fuzz(func(t *testing.T, msg string, nanos int64, level int, offset int) {
		// the time in UTC, or a zone of offset seconds (within ±18 h)
		when := time.Unix(0, nanos).UTC()
		if offset%(18*3600) != 0 {
			when = when.In(time.FixedZone("", offset%(18*3600)))
		}
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

// BenchmarkTrafficLine is one traffic line through NewText and through
// slog's TextHandler, the record's time moving a millisecond a line.
func BenchmarkTrafficLine(b *testing.B) {
	const msg = "net> 2026-11-26T07:05:09Z fix-login default POST /v1/messages -> 200 127.0.0.1:4000 3ms tokens: 760 in / 12 out"
	for _, h := range []struct {
		name string
		h    slog.Handler
	}{{"ours", NewText(io.Discard, nil)}, {"slog", slog.NewTextHandler(io.Discard, nil)}} {
		b.Run(h.name, func(b *testing.B) {
			at := time.Date(2026, 11, 26, 7, 5, 9, 0, time.Local)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = h.h.Handle(ctx, slog.NewRecord(at.Add(time.Duration(i)*time.Millisecond), slog.LevelInfo, msg, 0))
			}
		})
	}
}

// TestStampKeptPerSecond: the kept second serves only its own second and
// zone; every time is written as AppendFormat writes it.
func TestStampKeptPerSecond(t *testing.T) {
	base := time.Date(2026, 11, 26, 10, 0, 59, 0, time.UTC)
	east := time.FixedZone("", 5*3600+30*60)
	for _, when := range []time.Time{
		base.Add(7 * time.Millisecond), base.Add(999999999), // one second, kept
		base.Add(time.Second), base.Add(time.Second).In(east), // the next, and it in another zone
		base.Add(time.Second + 5*time.Millisecond).In(east), base.Add(time.Second + 5*time.Millisecond),
		base.Add(-time.Second), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 1e6, time.UTC),
	} {
		want := when.Truncate(time.Millisecond).Format(stampLayout)
		if got := string(appendStamp([]byte("x"), when)); got != "x"+want {
			t.Errorf("%v: %q, want %q", when, got, "x"+want)
		}
	}
}
