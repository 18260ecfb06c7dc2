package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Egress is the task's door to the network (CONTRACT §15): a sandboxed
// agent reaches a host only through the proxy, and only a host listed here.
type Egress struct {
	// Allow lists the destinations: "host" (any port), "host:port",
	// "*.example.org" (any name under example.org, not example.org itself,
	// any port), "*.example.org:443", an IP address, "[v6]:port". A name
	// that resolves to a loopback, private, link-local or metadata address
	// is reached only when that exact host:port is listed. Empty: no egress.
	Allow []string `koanf:"allow"`
}

// EgressRule is one parsed entry of egress.allow.
type EgressRule struct {
	// Host is the lower-case name or address ("example.org" for a wildcard
	// "*.example.org", with Wildcard set); Port is "" for any port.
	Host     string
	Port     string
	Wildcard bool
}

// Exact reports an entry that names one host and one port: the only kind
// that opens a private address.
func (r EgressRule) Exact() bool { return !r.Wildcard && r.Port != "" }

// Matches reports whether the rule allows host:port (host lower case, an
// IPv6 address without brackets).
func (r EgressRule) Matches(host, port string) bool {
	if r.Port != "" && r.Port != port {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Host)
	}
	return host == r.Host
}

// ParseEgressRule parses one entry of egress.allow.
func ParseEgressRule(s string) (EgressRule, error) {
	raw := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return EgressRule{}, fmt.Errorf("an empty entry: remove it")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ \t") {
		return EgressRule{}, fmt.Errorf("%q: give a host or host:port, not a URL (e.g. \"your-registry.example:443\")", raw)
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return EgressRule{}, fmt.Errorf("%q: an IPv6 address with a port is written [addr]:port", raw)
		}
		host, port = h, p
	} else if strings.Count(s, ":") == 1 {
		host, port, _ = strings.Cut(s, ":")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return EgressRule{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", raw)
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return EgressRule{}, fmt.Errorf("%q: an address with a zone cannot be listed", raw)
		}
		return EgressRule{Host: a.Unmap().String(), Port: port}, nil
	}
	r := EgressRule{Host: host, Port: port}
	if strings.HasPrefix(host, "*.") {
		r.Host, r.Wildcard = host[2:], true
	}
	r.Host = strings.TrimSuffix(r.Host, ".")
	if !validHostName(r.Host) {
		return EgressRule{}, fmt.Errorf("%q: not a host name (letters, digits, '-' and '.'; a wildcard only as a leading \"*.\")", raw)
	}
	if r.Wildcard && !strings.Contains(r.Host, ".") {
		return EgressRule{}, fmt.Errorf("%q would open every name under a top-level domain: name the domain (\"*.example.org\")", raw)
	}
	return r, nil
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Rules parses egress.allow (Validate has checked it).
func (e Egress) Rules() ([]EgressRule, error) {
	out := make([]EgressRule, 0, len(e.Allow))
	for i, s := range e.Allow {
		r, err := ParseEgressRule(s)
		if err != nil {
			return nil, bad(fmt.Sprintf("egress.allow[%d]", i), "%v", err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (e Egress) validate() error {
	_, err := e.Rules()
	return err
}
