package daemon

import (
	"slices"
	"sync"
	"time"

	"lazy/agent"
	"lazy/api"
	"lazy/grain/grainpb"
)

// status is the daemon's own DaemonInfo, as daemon.json and `lazy daemon
// status` show it. It is built whole once the listeners and the runner
// are, before the launcher (which reports a runner that became usable to
// it) and the cluster options (a member tells the others of itself from
// it); what changes later (the runner, the warnings, the sandbox line, the
// config source) changes under its lock.
type status struct {
	mu   sync.Mutex
	info api.DaemonInfo
}

func newStatus(info api.DaemonInfo) *status { return &status{info: info} }

// get is a copy of the info, its warnings its own.
func (s *status) get() api.DaemonInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.Warnings = slices.Clone(info.Warnings)
	return info
}

// setRunner records the runner in force, its limits and its warnings.
func (s *status) setRunner(r agent.Runner, l agent.Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info.Runner, s.info.Warnings = r.Name(), runnerWarnings(r)
	s.info.Sandbox = sandboxLine(r, l)
}

// setConfigSource records where the config in force came from.
func (s *status) setConfigSource(src string) {
	s.mu.Lock()
	s.info.ConfigSource = src
	s.mu.Unlock()
}

// describe is this member's part of its cluster info; certNotAfter is when
// its link certificate expires (zero: plaintext links).
func (s *status) describe(i *grainpb.MemberInfo, certNotAfter time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i.BaseUrl, i.Pid, i.Version = s.info.BaseURL, int32(s.info.PID), s.info.Version
	if !certNotAfter.IsZero() {
		i.CertNotAfter = certNotAfter.Unix()
	}
}
