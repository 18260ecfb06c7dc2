// Package layers holds the rules of lazy's import graph, as tests over
// `go list`: the RPC client compiles only the wire types (api, the state
// paths among them) and the standard library (no config, no
// other module, none of the server), and
// the web layer none of the domain below the commands. It has no code; a
// forbidden import that comes back fails `go test ./internal/layers`.
package layers
