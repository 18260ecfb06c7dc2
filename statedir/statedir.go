// Package statedir is the daemon side's name for where lazy keeps things
// (CONTRACT §1): the service home ($LAZY_HOME, or ~/.lazy) and each
// project's state directory under it, with the files in it (daemon.json,
// auth-token, the store, the logs ...).
//
// The paths themselves are package api's (api.StatePaths): how to reach a
// daemon is part of the wire contract, and the RPC client finds daemon.json
// and the auth token through api alone. This package only re-exports them,
// so the daemon, config and cmd keep one spelling; it holds no layout of
// its own and must not grow one.
package statedir

import "lazy/api"

// Paths are the files of one project's state directory (api.Paths).
type Paths = api.Paths

// Home is the service home: $LAZY_HOME from environ, or ~/.lazy.
func Home(environ []string) (string, error) { return api.LazyHome(environ) }

// CredentialsDir is where the credential files live when the config names
// none: <home>/credentials.
func CredentialsDir(home string) string { return api.CredentialsDir(home) }

// Slug names a project's state dir: base name, "-", 8 hex of sha256(root).
func Slug(root string) string { return api.StateSlug(root) }

// For lays out the state directory of the project at root, under home.
func For(home, root string) Paths { return api.StatePaths(home, root) }
