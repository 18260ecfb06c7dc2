package agent

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// A client's own stream (CONTRACT §17): claude's `--output-format
// stream-json --verbose` prints the turn as it runs, one JSON event a line
// (system init, each assistant message with its tool_use blocks, each user
// message with the tool_result blocks the client made, then the `result`
// object `--output-format json` prints alone). The launcher hands the
// agent's stdout to the driver's Stream as it arrives: the tool results and
// the files the client wrote go to ClientEvents (the daemon joins them to
// the turn's transcript, masked), and the stream keeps only what a JSON
// output held for ParseResult and the turn record. Everything in it is
// agent-written data: it is parsed, bounded and never acted on.

// ClientEvents receives what an agent client reported of its own turn as
// it ran. Calls come from the goroutine copying the agent's stdout, one at
// a time; they must not block. Nothing here is masked yet: the receiver
// masks (the agent may echo a placeholder).
type ClientEvents interface {
	// OnToolResult: a tool the model called ran; content is its result as
	// the client gave it back to the model, cut at MaxClientResult.
	OnToolResult(tool, content string, isError bool)
	// OnFileWritten: a tool that writes a file (Write, Edit, MultiEdit,
	// NotebookEdit) succeeded; path is relative to the worktree (absolute
	// when it lies outside).
	OnFileWritten(path string)
}

// Streamer is a driver whose client reports its turn on standard output as
// it runs. Stream returns the reader of one turn's stdout (nil: this
// driver's output is not a stream); ev may be nil.
type Streamer interface {
	Stream(worktree string, ev ClientEvents) Stream
}

// Stream reads a turn's stdout as it arrives (Write never fails, so a
// stream never stops the agent's output) and, at the end, gives Output:
// what ParseResult and the turn record get in place of the whole stream
// (nil when nothing was written to it: the runner's own stdout stands).
type Stream interface {
	Write(p []byte) (int, error)
	Output() []byte
}

// Bounds of a client stream: a longer line is skipped (never the result,
// which a line of this size holds), a tool result is cut, the tools
// awaiting their result are bounded, and the notices kept beside the
// result are bounded.
const (
	maxStreamLine   = 8 << 20
	MaxClientResult = 16 << 10
	maxPendingTools = 256
	maxNotices      = 64 << 10
)

// claudeStream reads claude's stream-json.
type claudeStream struct {
	worktree string
	ev       ClientEvents
	lines    lineSplitter
	pending  map[string]toolOf // tool_use id → the tool and the file it writes
	notices  []byte            // lines that are not stream events (a notice before the JSON)
	result   []byte            // the last result event
	written  bool
}

type toolOf struct{ name, file string }

var _ Stream = (*claudeStream)(nil)

func newClaudeStream(worktree string, ev ClientEvents) *claudeStream {
	return &claudeStream{worktree: worktree, ev: ev, pending: map[string]toolOf{}}
}

func (c *claudeStream) Write(p []byte) (int, error) {
	c.written = c.written || len(p) > 0
	c.lines.write(p, c.event)
	return len(p), nil
}

// lineSplitter cuts a stream written in pieces of any size into its lines,
// each handed on trimmed; a line past maxStreamLine is dropped whole.
type lineSplitter struct {
	line []byte
	skip bool // the line is past maxStreamLine: dropped to its end
}

func (l *lineSplitter) write(p []byte, line func([]byte)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.add(p)
			return
		}
		l.add(p[:i])
		if !l.skip {
			line(bytes.TrimSpace(l.line))
		}
		l.line, l.skip = l.line[:0], false
		p = p[i+1:]
	}
}

func (l *lineSplitter) add(b []byte) {
	if l.skip {
		return
	}
	if len(l.line)+len(b) > maxStreamLine {
		l.skip, l.line = true, l.line[:0]
		return
	}
	l.line = append(l.line, b...)
}

// flush hands on a last line that never ended as if it had.
func (l *lineSplitter) flush(line func([]byte)) {
	if len(l.line) > 0 && !l.skip {
		line(bytes.TrimSpace(l.line))
	}
	l.line, l.skip = l.line[:0], false
}

// Output is the stream's notices and its last result event, one a line:
// what `--output-format json` would have printed. A last line that never
// ended is read as if it had.
func (c *claudeStream) Output() []byte {
	if !c.written {
		return nil
	}
	c.lines.flush(c.event)
	out := append([]byte(nil), c.notices...)
	if c.result != nil {
		out = append(append(out, c.result...), '\n')
	}
	return out
}

// streamEvent is the part of a stream-json line the stream reads.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// contentBlock is a block of a message's content: a tool_use (assistant)
// or a tool_result (user).
type contentBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (c *claudeStream) event(line []byte) {
	if len(line) == 0 {
		return
	}
	var e streamEvent
	if line[0] != '{' || json.Unmarshal(line, &e) != nil {
		c.notice(line)
		return
	}
	switch e.Type {
	case "":
		c.notice(line) // a JSON object that is no stream event: kept as printed
	case "result":
		c.result = append(c.result[:0], line...)
	case "assistant", "user":
		if e.Message == nil {
			return
		}
		var blocks []contentBlock
		if json.Unmarshal(e.Message.Content, &blocks) != nil {
			return // a plain string: no tool in it
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				if len(c.pending) < maxPendingTools {
					c.pending[b.ID] = toolOf{name: b.Name, file: writtenFile(b.Name, b.Input)}
				}
			case "tool_result":
				t, ok := c.pending[b.ToolUseID]
				if !ok {
					continue // a result of no tool this turn saw called
				}
				delete(c.pending, b.ToolUseID)
				if c.ev == nil {
					continue
				}
				c.ev.OnToolResult(t.name, clip(resultText(b.Content), MaxClientResult), b.IsError)
				if t.file != "" && !b.IsError {
					c.ev.OnFileWritten(c.relative(t.file))
				}
			}
		}
	}
}

func (c *claudeStream) notice(line []byte) {
	if len(c.notices)+len(line)+1 <= maxNotices {
		c.notices = append(append(c.notices, line...), '\n')
	}
}

// relative is path relative to the worktree when it lies inside it, else
// the path cleaned.
func (c *claudeStream) relative(path string) string { return relativeTo(c.worktree, path) }

// relativeTo is path relative to worktree when it lies inside it, else the
// path cleaned (a relative path is the worktree's already).
func relativeTo(worktree, path string) string {
	p := filepath.Clean(path)
	if worktree != "" && filepath.IsAbs(p) {
		if rel, err := filepath.Rel(filepath.Clean(worktree), p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel
		}
	}
	return clip(p, 1024)
}

// writtenFile is the file a claude tool writes, from its input (""
// for a tool that writes none).
func writtenFile(name string, input json.RawMessage) string {
	switch name {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
	default:
		return ""
	}
	var in struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	if in.FilePath != "" {
		return in.FilePath
	}
	return in.NotebookPath
}

// resultText is a tool_result's content as text: a string, or the text of
// its text blocks (an image block is named, not carried).
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for i, bl := range blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		} else {
			b.WriteString("[" + bl.Type + "]")
		}
	}
	return b.String()
}

// clip bounds s to n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
