package api

// ClusterStatus is `lazy cluster status`: the members as this member sees
// them, what each hosts, and the health of what they share.
type ClusterStatus struct {
	Name    string          `json:"name"`
	Links   string          `json:"links"` // "mutual TLS" | "plaintext"
	Members []ClusterMember `json:"members"`
	Etcd    []Health        `json:"etcd"`
	Store   Health          `json:"store"`
	// Membership is the answering member's own place in the cluster
	Membership ClusterMembership `json:"membership"`
}

// ClusterMembership is whether a member is in its cluster: out when etcd
// dropped it or it could not reach etcd for its lease's length, until it
// has joined again (by itself, once etcd answers).
type ClusterMembership struct {
	In    bool   `json:"in"`
	Since string `json:"since"` // RFC 3339: when it came in or went out
	Why   string `json:"why,omitempty"`
	ID    string `json:"id"`   // its member id in etcd now
	Life  int    `json:"life"` // 1, then one more each time it joined again
}

// ClusterMember is one member and what it said of itself.
type ClusterMember struct {
	ID           string   `json:"id"`
	Address      string   `json:"address"`
	Self         bool     `json:"self"`
	BaseURL      string   `json:"base_url,omitempty"`
	PID          int      `json:"pid,omitempty"`
	Version      string   `json:"version,omitempty"`
	Grains       int      `json:"grains"` // task actors it hosts now
	Tasks        []string `json:"tasks"`
	RunningTurns int      `json:"running_turns"`
	// CertExpires is when the member's link certificate expires (RFC 3339;
	// empty: plaintext links)
	CertExpires string `json:"cert_expires,omitempty"`
	// Error is why the member did not answer (it is listed all the same)
	Error string `json:"error,omitempty"`
}

// Health is one shared service's state.
type Health struct {
	Endpoint string `json:"endpoint,omitempty"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
}
