package main

import "testing"

// TestParseBench: figures on the benchmark's own line, and figures a log
// line of the code under test split from the benchmark's name.
func TestParseBench(t *testing.T) {
	out := "goos: linux\n" +
		"BenchmarkModelCallNoWatcher-2   \t    2000\t    409377 ns/op\t   61344 B/op\t     885 allocs/op\n" +
		"BenchmarkModelCallWatched-2     \t2026/11/26 04:54:48 httputil: ReverseProxy read error during body copy\n" +
		"    2000\t    465307 ns/op\t   77996 B/op\t    1343 allocs/op\n" +
		"BenchmarkGitPerTask/single-2 \t 3\t 1.5e+09 ns/op\t 12.00 git/task\n" +
		"PASS\n"
	got := parseBench(out)
	for name, want := range map[string]map[string]float64{
		"ModelCallNoWatcher": {"ns/op": 409377, "B/op": 61344, "allocs/op": 885},
		"ModelCallWatched":   {"ns/op": 465307, "B/op": 77996, "allocs/op": 1343},
		"GitPerTask/single":  {"ns/op": 1.5e9, "git/task": 12},
	} {
		for unit, v := range want {
			if got[name][unit] != v {
				t.Errorf("%s %s: %v, want %v (all: %v)", name, unit, got[name][unit], v, got)
			}
		}
	}
}
