package api

import (
	"strconv"
	"strings"
	"time"
)

// Traffic is one proxied request, attributed from its grant.
type Traffic struct {
	Time     time.Time `json:"time"`
	TaskRef  string    `json:"task_ref,omitempty"`
	TaskID   string    `json:"task_id,omitempty"`
	Role     string    `json:"role,omitempty"`
	Method   string    `json:"method"`
	Path     string    `json:"path"` // the placeholder in an editor path is written ***
	Status   int       `json:"status"`
	Upstream string    `json:"upstream,omitempty"` // host
	Millis   int64     `json:"ms"`
	Refused  string    `json:"refused,omitempty"`  // cause of a credential refusal
	Tripwire string    `json:"tripwire,omitempty"` // what tripped a wire
	Error    string    `json:"error,omitempty"`    // why no upstream answered
	// Reserved is what the proxy held of the task's token budget for the
	// call before it left (0: the task has no budget). Charged is what the
	// call counts against the budget: the upstream's own input + output
	// tokens for a reply read to its end; at least Reserved for a call cut
	// before (the upstream may have spent it all); 0 for one that never left.
	Reserved int64 `json:"reserved,omitempty"`
	Charged  int64 `json:"charged,omitempty"`
	// ClaimedRef and ClaimedRole come from x-svc-* headers on traffic with
	// no grant: anyone can send them, so they never match a task filter and
	// the line marks them unverified.
	ClaimedRef  string `json:"claimed_task_ref,omitempty"`
	ClaimedRole string `json:"claimed_role,omitempty"`
	// Usage is what the call cost, as the upstream's reply said (nil: it
	// said nothing, as count_tokens and refused calls)
	Usage *CallUsage `json:"usage,omitempty"`
	// Egress marks a connection from a task's sandbox to the network
	// through the proxy (CONTRACT §15): a CONNECT tunnel (Path is its
	// host:port) or an absolute-form http:// request (Path is the URL
	// without its query). Dest is the destination's host:port, BytesUp and
	// BytesDown what went each way (a tunnel's whole stream, a request's
	// bodies).
	Egress    bool   `json:"egress,omitempty"`
	Dest      string `json:"dest,omitempty"`
	BytesUp   int64  `json:"bytes_up,omitempty"`
	BytesDown int64  `json:"bytes_down,omitempty"`
}

// CallUsage is what one model call cost, as the upstream itself reported
// it (the fields of its "usage" object).
type CallUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Tokens is what a budget counts: input and output tokens.
func (u CallUsage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports a call that reported no tokens.
func (u CallUsage) IsZero() bool { return u == CallUsage{} }

// Line renders the traffic line of CONTRACT §6. Every field is made safe for
// one line: a byte outside printable ASCII, or a space, is written %XX, so no
// path or header can forge a line of its own.
func (t Traffic) Line() string { return string(t.AppendLine(nil)) }

// AppendLine appends the line Line renders to b (the proxy builds each
// call's line into a buffer of its own, no string per field).
func (t *Traffic) AppendLine(b []byte) []byte {
	ref, role := dash(t.TaskRef), dash(t.Role)
	unverified := false
	if t.TaskRef == "" && t.ClaimedRef != "" {
		ref, unverified = t.ClaimedRef+"?", true
	}
	if t.Role == "" && t.ClaimedRole != "" {
		role, unverified = t.ClaimedRole+"?", true
	}
	b = append(b, "net> "...)
	b = t.Time.UTC().AppendFormat(b, time.RFC3339)
	for _, f := range [...]string{ref, role, t.Method, t.Path} {
		b = appendSafe(append(b, ' '), f)
	}
	b = strconv.AppendInt(append(b, " -> "...), int64(t.Status), 10)
	if t.Egress {
		// CONTRACT §15: bytes each way where a model call names its upstream
		b = strconv.AppendInt(append(b, ' '), t.BytesUp, 10)
		b = strconv.AppendInt(append(b, '/'), t.BytesDown, 10)
	} else {
		b = appendSafe(append(b, ' '), dash(t.Upstream))
	}
	b = append(strconv.AppendInt(append(b, ' '), t.Millis, 10), "ms"...)
	if u := t.Usage; u != nil {
		b = strconv.AppendInt(append(b, " tokens: "...), u.InputTokens, 10)
		b = append(strconv.AppendInt(append(b, " in / "...), u.OutputTokens, 10), " out"...)
		if u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
			b = strconv.AppendInt(append(b, " (cache "...), u.CacheReadInputTokens, 10)
			b = append(strconv.AppendInt(append(b, " read / "...), u.CacheCreationInputTokens, 10), " written)"...)
		}
	}
	if t.Refused != "" {
		b = appendSafe(append(b, " refused: "...), t.Refused)
	}
	if t.Tripwire != "" {
		b = appendSafe(append(b, " tripwire: "...), t.Tripwire)
	}
	if t.Error != "" {
		// words kept readable; control bytes dropped, so no forged line
		b = append(b, " error: "...)
		b = append(b, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, strings.Join(strings.Fields(t.Error), " "))...)
	}
	if unverified {
		b = append(b, " (attribution unverified: x-svc headers, no grant)"...)
	}
	return b
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// appendSafe appends s with every byte that is a space or not printable
// ASCII percent-encoded.
func appendSafe(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return b
}
