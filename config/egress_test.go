package config

import "testing"

// TestEgressRules: what each form of an egress.allow entry opens, and
// which entries open a private address (an exact host:port only).
func TestEgressRules(t *testing.T) {
	for _, tc := range []struct {
		entry, host, port string
		match, exact      bool
	}{
		{"your-registry.example", "your-registry.example", "443", true, false},
		{"your-registry.example", "sub.your-registry.example", "443", false, false},
		{"Your-Registry.example.:8443", "your-registry.example", "8443", true, true},
		{"your-registry.example:8443", "your-registry.example", "443", false, true},
		{"*.mirror.example", "a.b.mirror.example", "80", true, false},
		{"*.mirror.example", "mirror.example", "80", false, false},
		{"*.mirror.example:443", "x.mirror.example", "443", true, false},
		{"127.0.0.1:4000", "127.0.0.1", "4000", true, true},
		{"[::1]:4000", "::1", "4000", true, true},
		{"::ffff:10.0.0.1", "10.0.0.1", "22", true, false},
	} {
		r, err := ParseEgressRule(tc.entry)
		if err != nil {
			t.Fatalf("%q: %v", tc.entry, err)
		}
		if got := r.Matches(tc.host, tc.port); got != tc.match {
			t.Errorf("%q on %s:%s: got %v, want %v", tc.entry, tc.host, tc.port, got, tc.match)
		}
		if r.Exact() != tc.exact {
			t.Errorf("%q exact: got %v, want %v", tc.entry, r.Exact(), tc.exact)
		}
	}
	for _, bad := range []string{"", "http://x.example", "x.example/path", "*.com", "a.*.example", "x.example:0", "[::1]", "fe80::1%eth0", "user@x.example"} {
		if _, err := ParseEgressRule(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
