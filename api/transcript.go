package api

// Bounds of what a transcript carries: one event's text, one tool call's
// input, and a whole turn's transcript (text and tool inputs together).
// Past the turn's bound the turn's transcript is marked truncated and
// nothing more of it is sent or kept.
const (
	MaxTranscriptEvent = 4 << 10
	MaxToolInput       = 2 << 10
	MaxTurnTranscript  = 64 << 10
)

// TranscriptPart is one transcript event: new text of a model call (a
// piece that follows the text sent before it), or a tool call the model
// made, or the call's end with its usage. Seq counts the turn's parts from
// 1, so a page that rendered the turn up to Seq skips the parts it has.
type TranscriptPart struct {
	Turn  int        `json:"turn"`
	Seq   int        `json:"seq"`
	Call  int        `json:"call"` // the model call of the turn, from 1
	Text  string     `json:"text,omitempty"`
	Tool  *ToolCall  `json:"tool,omitempty"`
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

// TurnTranscript is a turn's transcript: its model calls in order, the
// files its tool calls wrote, its tokens, and Seq, the last part it holds.
type TurnTranscript struct {
	Turn      int              `json:"turn"`
	Seq       int              `json:"seq"`
	Calls     []TranscriptCall `json:"calls"`
	Files     []string         `json:"files,omitempty"`
	Tokens    int64            `json:"tokens"`
	Truncated bool             `json:"truncated,omitempty"`
	// Bytes is what the transcript holds of text and tool inputs.
	Bytes int `json:"bytes"`
}

// TranscriptCall is one model call of a turn.
type TranscriptCall struct {
	Call  int        `json:"call"`
	Text  string     `json:"text"`
	Tools []ToolCall `json:"tools,omitempty"`
	Done  bool       `json:"done,omitempty"`
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
	t.Bytes += len(p.Text)
	if p.Tool != nil {
		c.Tools = append(c.Tools, *p.Tool)
		t.Bytes += len(p.Tool.Name) + len(p.Tool.Input)
		if f := p.Tool.File; f != "" && !hasString(t.Files, f) {
			t.Files = append(t.Files, f)
		}
	}
	if p.Done {
		c.Done = true
	}
	if p.Tokens > t.Tokens {
		t.Tokens = p.Tokens
	}
	return true
}

func hasString(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
