package agent

import (
	"encoding/json"
	"slices"
)

// codex's own stream (CONTRACT §17): `codex exec --json` prints its turn
// as it runs, one JSON event a line (thread.started, turn.started,
// item.started and item.completed of each item: agent_message, reasoning,
// command_execution, file_change, ..., then turn.completed or
// turn.failed). A completed command_execution is a tool result (tool
// "shell": the command and its output); a completed file_change names the
// files the client wrote. The stream keeps for ParseResult only the lines
// it reads (see Codex.ParseResult), bounded. Everything in it is
// agent-written data: parsed, bounded, never acted on.

var _ Streamer = Codex{}

// Stream reads `codex exec --json` as it arrives.
func (Codex) Stream(worktree string, ev ClientEvents) Stream {
	return &codexStream{worktree: worktree, ev: ev, message: -1}
}

// CodexShellTool is the tool name a codex command execution is reported as.
const CodexShellTool = "shell"

// codexStream reads codex's JSONL events.
type codexStream struct {
	worktree string
	ev       ClientEvents
	lines    lineSplitter
	kept     [][]byte // the lines ParseResult reads, in order
	keptSize [2]int   // bytes kept of notices and errors [0], of the thread and turn events [1]
	message  int      // index in kept of the last agent_message (-1: none)
	written  bool
}

var _ Stream = (*codexStream)(nil)

func (c *codexStream) Write(p []byte) (int, error) {
	c.written = c.written || len(p) > 0
	c.lines.write(p, c.event)
	return len(p), nil
}

// Output is what ParseResult reads of the whole stream, one line each, in
// the order printed: the thread, the last agent message, the turn's end
// and its errors, and the lines that are not events (bounded, as the
// notices of claude's stream are). A last line that never ended is read
// as if it had.
func (c *codexStream) Output() []byte {
	if !c.written {
		return nil
	}
	c.lines.flush(c.event)
	var out []byte
	for _, l := range c.kept {
		out = append(append(out, l...), '\n')
	}
	return out
}

// codexItemEvent is the part of an item event the stream reads.
type codexItemEvent struct {
	Type string `json:"type"`
	Item *struct {
		Type             string `json:"type"`
		Status           string `json:"status"`
		Command          string `json:"command"`
		AggregatedOutput string `json:"aggregated_output"`
		ExitCode         *int   `json:"exit_code"`
		Changes          []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"changes"`
	} `json:"item"`
}

func (c *codexStream) event(line []byte) {
	if len(line) == 0 {
		return
	}
	var e codexItemEvent
	if line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Type == "" {
		c.keep(line, true) // a notice, or a JSON object that is no event
		return
	}
	switch e.Type {
	case "thread.started", "turn.completed", "turn.failed":
		c.keep(line, false)
	case "error":
		c.keep(line, true) // codex prints one per retry: bounded
	case "item.completed":
		if e.Item == nil {
			return
		}
		switch e.Item.Type {
		case "agent_message":
			// only the last message is the answer: an earlier one is
			// followed by this one, which ParseResult reads over it
			if c.message >= 0 {
				c.kept = slices.Delete(c.kept, c.message, c.message+1)
			}
			c.message = len(c.kept)
			c.kept = append(c.kept, append([]byte(nil), line...))
		case "command_execution":
			if c.ev == nil {
				return
			}
			failed := e.Item.Status == "failed" || e.Item.Status == "declined" || (e.Item.ExitCode != nil && *e.Item.ExitCode != 0)
			c.ev.OnToolResult(CodexShellTool, clip("$ "+e.Item.Command+"\n"+e.Item.AggregatedOutput, MaxClientResult), failed)
		case "file_change":
			if c.ev == nil || e.Item.Status == "failed" {
				return
			}
			for i, ch := range e.Item.Changes {
				if i == maxPendingTools {
					break
				}
				if ch.Path != "" {
					c.ev.OnFileWritten(relativeTo(c.worktree, ch.Path))
				}
			}
		}
	}
}

// keep appends line to what Output gives. Notices and errors (bounded)
// and the thread and turn events (one each in a turn codex wrote) each
// stop being kept past maxNotices: an agent printing events of its own
// cannot grow the stream's memory.
func (c *codexStream) keep(line []byte, notice bool) {
	k := 1
	if notice {
		k = 0
	}
	if c.keptSize[k]+len(line)+1 > maxNotices {
		return
	}
	c.keptSize[k] += len(line) + 1
	c.kept = append(c.kept, append([]byte(nil), line...))
}
