package task

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewID(t *testing.T) {
	a, b := NewID(time.Now()), NewID(time.Now())
	if !IsFullID(a) || a == b {
		t.Fatalf("got %q and %q", a, b)
	}
	if a[12] != '7' {
		t.Errorf("version nibble: got %c, want 7", a[12])
	}
	later := NewID(time.Now().Add(time.Second))
	if later < a {
		t.Errorf("ids must sort by time: %s < %s", later, a)
	}
}

func TestResolve(t *testing.T) {
	all := []Ident{
		{ID: "0190aaaa000070008000000000000001", Code: "fix-login"},
		{ID: "0190aaab000070008000000000000002", Code: "fix"},
		{ID: "0190bbbb000070008000000000000003"},
		{ID: "dead0000000070008000000000000004", Code: "0190aaaa"}, // a code equal to another's short id
	}
	cases := []struct {
		in, want string
		err      string
	}{
		{"0190aaab000070008000000000000002", "fix", ""},
		{"fix", "fix", ""},             // exact code, no prefix matching of codes
		{"fix-login", "fix-login", ""}, // codes share prefixes
		{"0190aaaa", "0190aaaa", ""},   // exact code wins over exact short id
		{"0190bbbb", "", ""},           // exact short id
		{"0190b", "", ""},              // unique prefix
		{"0190", "", "matches 3 tasks"},
		{"019", "", "no task matches"}, // too short
		{"fi", "", "no task matches"},
		{"", "", "no task given"},
	}
	for _, tc := range cases {
		got, err := Resolve(tc.in, all)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Resolve(%q): got %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		if got.Code != tc.want {
			t.Errorf("Resolve(%q): got %+v, want code %q", tc.in, got, tc.want)
		}
	}
	var amb *AmbiguousError
	if _, err := Resolve("0190", all); !errors.As(err, &amb) || len(amb.Candidates) != 3 {
		t.Errorf("ambiguous: got %v", err)
	}
}

func TestValidCode(t *testing.T) {
	for _, ok := range []string{"a", "Fix-1.2_x", strings.Repeat("a", 40)} {
		if ValidCode(ok) != nil {
			t.Errorf("%q should be valid", ok)
		}
	}
	for _, bad := range []string{"", "1abc", "a b", strings.Repeat("a", 41), "a/b"} {
		if ValidCode(bad) == nil {
			t.Errorf("%q should be refused", bad)
		}
	}
}

func FuzzResolve(f *testing.F) {
	all := []Ident{{ID: "0190aaaa000070008000000000000001", Code: "x"}, {ID: "0190aaab000070008000000000000002"}}
	for _, s := range []string{"x", "0190", "0190aaab", "", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Resolve(in, all)
		if err == nil && got.ID == "" {
			t.Fatalf("Resolve(%q) returned no task and no error", in)
		}
	})
}

func TestNewTaskIDSkipsTakenShortIDs(t *testing.T) {
	now := time.UnixMilli(1_790_000_000_000)
	taken := map[string]bool{}
	var prev string
	for i := 0; i < 5; i++ {
		id, err := NewTaskID(now, func(s string) bool { return taken[s] })
		if err != nil {
			t.Fatal(err)
		}
		if !IsFullID(id) || id[12] != '7' {
			t.Fatalf("%s is not a UUIDv7", id)
		}
		if taken[ShortID(id)] {
			t.Fatalf("short id %s given twice", ShortID(id))
		}
		if id <= prev {
			t.Fatalf("ids out of order: %s after %s", id, prev)
		}
		taken[ShortID(id)], prev = true, id
	}
	if len(taken) != 5 {
		t.Fatalf("%d short ids for 5 tasks made in the same millisecond", len(taken))
	}
	if _, err := NewTaskID(now, func(string) bool { return true }); err == nil {
		t.Fatal("an id was given though every short id is taken")
	}
}
