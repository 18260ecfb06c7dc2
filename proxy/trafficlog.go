package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"lazy/api"
)

// The traffic line of every call goes to the daemon's log at info
// (CONTRACT §6). It is built into a pooled buffer (api.Traffic.AppendLine:
// no string per field) and handed to the log's handler as one record,
// without the caller's program counter the logger would look up for it
// (no handler of lazy's logs the source).

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// logTraffic writes tr's line to the log at level, if the log takes it.
func (p *Proxy) logTraffic(ctx context.Context, level slog.Level, tr *api.Traffic) {
	h := p.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	bp := linePool.Get().(*[]byte)
	b := tr.AppendLine((*bp)[:0])
	_ = h.Handle(ctx, slog.NewRecord(time.Now(), level, string(b), 0))
	if cap(b) <= 4<<10 {
		*bp = b
		linePool.Put(bp)
	}
}
