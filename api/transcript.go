package api

// Bounds of what a transcript carries: one event's text, one tool call's
// input, one tool result, and a whole turn's transcript (text, tool
// inputs, tool results and files written together).
// Past the turn's bound the turn's transcript is marked truncated and
// nothing more of it is sent or kept.
const (
	MaxTranscriptEvent = 4 << 10
	MaxToolInput       = 2 << 10
	MaxToolResult      = 2 << 10
	MaxTurnTranscript  = 64 << 10
)

// TranscriptPart is one transcript event: new text of a model call (a
// piece that follows the text sent before it), or a tool call the model
// made, or the call's end with its usage — all read at the proxy — or,
// from the agent client's own stream where it has one (claude-code's
// stream-json), a tool's result or a file the client wrote. Seq counts the
// turn's parts from 1, so a page that rendered the turn up to Seq skips
// the parts it has.
type TranscriptPart struct {
	Turn int       `json:"turn"`
	Seq  int       `json:"seq"`
	Call int       `json:"call"` // the model call of the turn, from 1
	Text string    `json:"text,omitempty"`
	Tool *ToolCall `json:"tool,omitempty"`
	// Result is a tool's result as the agent client reported it, masked
	// and cut at MaxToolResult; Call is the model call that asked for it
	// (the turn's latest when it arrived).
	Result *ToolResult `json:"result,omitempty"`
	// Wrote is a file the agent client reported it wrote (a Write or Edit
	// that succeeded), relative to the worktree.
	Wrote string     `json:"wrote,omitempty"`
	Done  bool       `json:"done,omitempty"` // the call's reply ended
	Usage *CallUsage `json:"usage,omitempty"`
	// Tokens is the turn's input + output tokens so far.
	Tokens int64 `json:"tokens,omitempty"`
	// Truncated: the turn's transcript reached MaxTurnTranscript; no
	// further part is sent.
	Truncated bool `json:"truncated,omitempty"`
}

// ToolCall is a tool the model asked for: its name and input (JSON, cut at
// MaxToolInput), and the file it names when it is one the agent writes.
type ToolCall struct {
	Name  string `json:"name"`
	Input string `json:"input,omitempty"`
	File  string `json:"file,omitempty"`
}

// ToolResult is what a tool returned, as the agent client reported it on
// its own stream: the tool's name, its result's text (masked, cut at
// MaxToolResult) and whether the client marked it an error (a refused
// write in plan mode, a failed command).
type ToolResult struct {
	Tool    string `json:"tool"`
	Content string `json:"content,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// TurnTranscript is a turn's transcript: its model calls in order, the
// files its tool calls named for writing (Files, as the model named them,
// read at the proxy) and the files the agent client reported it wrote
// (Written, relative to the worktree, from the client's own stream), its
// tokens, and Seq, the last part it holds.
type TurnTranscript struct {
	Turn      int              `json:"turn"`
	Seq       int              `json:"seq"`
	Calls     []TranscriptCall `json:"calls"`
	Files     []string         `json:"files,omitempty"`
	Written   []string         `json:"written,omitempty"`
	Tokens    int64            `json:"tokens"`
	Truncated bool             `json:"truncated,omitempty"`
	// Bytes is what the transcript holds of text and tool inputs.
	Bytes int `json:"bytes"`
}

// TranscriptCall is one model call of a turn: its text, the tools it
// called and the results the agent client reported of them.
type TranscriptCall struct {
	Call    int          `json:"call"`
	Text    string       `json:"text"`
	Tools   []ToolCall   `json:"tools,omitempty"`
	Results []ToolResult `json:"results,omitempty"`
	Done    bool         `json:"done,omitempty"`
}

// Apply adds a part to the transcript and reports whether it was kept
// (false: it is past the turn's bound, or one the transcript holds).
func (t *TurnTranscript) Apply(p TranscriptPart) bool {
	if p.Seq <= t.Seq || t.Truncated {
		return false
	}
	t.Seq = p.Seq
	if p.Truncated {
		t.Truncated = true
		return true
	}
	for len(t.Calls) < p.Call {
		t.Calls = append(t.Calls, TranscriptCall{Call: len(t.Calls) + 1})
	}
	c := &t.Calls[p.Call-1]
	c.Text += p.Text
	t.Bytes += p.Size()
	if p.Tool != nil {
		c.Tools = append(c.Tools, *p.Tool)
		if f := p.Tool.File; f != "" && !hasString(t.Files, f) {
			t.Files = append(t.Files, f)
		}
	}
	if r := p.Result; r != nil {
		c.Results = append(c.Results, *r)
	}
	if f := p.Wrote; f != "" && !hasString(t.Written, f) {
		t.Written = append(t.Written, f)
	}
	if p.Done {
		c.Done = true
	}
	if p.Tokens > t.Tokens {
		t.Tokens = p.Tokens
	}
	return true
}

// Size is what the part adds to a turn's transcript toward
// MaxTurnTranscript: its text, tool call, tool result and file written.
func (p TranscriptPart) Size() int {
	n := len(p.Text) + p.toolSize() + len(p.Wrote)
	if r := p.Result; r != nil {
		n += len(r.Tool) + len(r.Content)
	}
	return n
}

func (p TranscriptPart) toolSize() int {
	if p.Tool == nil {
		return 0
	}
	return len(p.Tool.Name) + len(p.Tool.Input)
}

func hasString(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
