package proxy

import (
	"fmt"
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
	Refused  string    `json:"refused,omitempty"` // cause of a credential refusal
}

// Line renders the traffic line of CONTRACT §6.
func (t Traffic) Line() string {
	ref, role, up := dash(t.TaskRef), dash(t.Role), dash(t.Upstream)
	s := fmt.Sprintf("net> %s %s %s %s %s -> %d %s %dms", t.Time.UTC().Format(time.RFC3339), ref, role, t.Method, t.Path, t.Status, up, t.Millis)
	if t.Refused != "" {
		s += " refused: " + t.Refused
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
