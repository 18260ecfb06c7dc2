package agent

import (
	"encoding/json"
	"strings"
)

// gemini's own stream (CONTRACT §17): `gemini -p "" --output-format
// stream-json` prints its turn as it runs, one JSON event a line (checked
// with 0.61.0, agent/testdata/gemini-stream.jsonl): init (the session
// id), message (the user's prompt, then the assistant's text in deltas),
// tool_use (tool_name, tool_id, parameters), tool_result (tool_id, status
// "success" or "error", output, error) and at the end result (status,
// error, stats). A tool_result is reported under the name of its
// tool_use; a write_file or replace that succeeded names the file the
// client wrote. The stream keeps for ParseResult only the lines it reads
// (see Gemini.ParseResult), bounded. Everything in it is agent-written
// data: parsed, bounded, never acted on.

var _ Streamer = Gemini{}

// Stream reads `--output-format stream-json` as it arrives.
func (Gemini) Stream(worktree string, ev ClientEvents) Stream {
	return &geminiStream{worktree: worktree, ev: ev, pending: map[string]toolOf{}}
}

// geminiStream reads gemini's JSONL events.
type geminiStream struct {
	worktree string
	ev       ClientEvents
	lines    lineSplitter
	pending  map[string]toolOf // tool_id → the tool and the file it writes
	kept     [][]byte          // the lines ParseResult reads, in order
	result   []byte            // the last result event
	keptSize [2]int            // bytes kept of notices [0], of the init, message and result events [1]
	written  bool
}

var _ Stream = (*geminiStream)(nil)

func (g *geminiStream) Write(p []byte) (int, error) {
	g.written = g.written || len(p) > 0
	g.lines.write(p, g.event)
	return len(p), nil
}

// Output is what ParseResult reads of the whole stream, one line each, in
// the order printed: init, the assistant's message deltas and the lines
// that are not events (bounded), then the last result event. A last line that never
// ended is read as if it had.
func (g *geminiStream) Output() []byte {
	if !g.written {
		return nil
	}
	g.lines.flush(g.event)
	var out []byte
	for _, l := range g.kept {
		out = append(append(out, l...), '\n')
	}
	if g.result != nil {
		out = append(append(out, g.result...), '\n')
	}
	return out
}

// geminiEvent is the part of a stream-json line the stream and
// ParseResult read.
type geminiEvent struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (g *geminiStream) event(line []byte) {
	if len(line) == 0 {
		return
	}
	var e geminiEvent
	if line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Type == "" {
		g.keep(line, true) // a notice, or a JSON object that is no event
		return
	}
	switch e.Type {
	case "init":
		g.keep(line, false)
	case "result":
		g.result = append(g.result[:0], line...)
	case "error":
		g.keep(line, true)
	case "message":
		if e.Role == "assistant" {
			// the answer: bounded as a whole (an answer past it is cut)
			g.keep(line, false)
		}
	case "tool_use":
		if len(g.pending) < maxPendingTools {
			g.pending[e.ToolID] = toolOf{name: e.ToolName, file: geminiWrittenFile(e.ToolName, e.Parameters)}
		}
	case "tool_result":
		t, ok := g.pending[e.ToolID]
		if !ok {
			return // a result of no tool this turn saw called
		}
		delete(g.pending, e.ToolID)
		if g.ev == nil {
			return
		}
		failed := e.Status != "success"
		out := e.Output
		if out == "" && e.Error != nil {
			out = e.Error.Message
		}
		g.ev.OnToolResult(t.name, clip(out, MaxClientResult), failed)
		if t.file != "" && !failed {
			g.ev.OnFileWritten(relativeTo(g.worktree, t.file))
		}
	}
}

// keep appends line to what Output gives; notices [0] and the events
// ParseResult reads [1] each stop being kept past their bound: an agent
// printing events of its own cannot grow the stream's memory.
func (g *geminiStream) keep(line []byte, notice bool) {
	k, bound := 1, maxStreamLine
	if notice {
		k, bound = 0, maxNotices
	}
	if g.keptSize[k]+len(line)+1 > bound {
		return
	}
	g.keptSize[k] += len(line) + 1
	g.kept = append(g.kept, append([]byte(nil), line...))
}

// geminiWrittenFile is the file a gemini tool writes, from its parameters
// ("" for a tool that writes none).
func geminiWrittenFile(name string, params json.RawMessage) string {
	if name != "write_file" && name != "replace" {
		return ""
	}
	var in struct {
		FilePath string `json:"file_path"`
	}
	if json.Unmarshal(params, &in) != nil {
		return ""
	}
	return in.FilePath
}

// parseGeminiStream reads a stream-json output: ok is false when no
// init or result event is in it.
func parseGeminiStream(stdout []byte) (res Result, ok bool) {
	var text strings.Builder
	var result *geminiEvent
	for _, line := range strings.Split(string(stdout), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e geminiEvent
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Type {
		case "init":
			if res.SessionID == "" {
				res.SessionID = e.SessionID
			}
			ok = true
		case "message":
			if e.Role == "assistant" {
				text.WriteString(e.Content)
			}
		case "result":
			result, ok = &e, true
		}
	}
	res.Text = text.String()
	if result != nil && result.Status != "success" {
		res.IsError = true
		switch {
		case result.Error != nil && result.Error.Message != "":
			res.Text = result.Error.Message
		case res.Text == "":
			res.Text = "gemini ended its turn with status " + result.Status
		}
	}
	return res, ok
}
