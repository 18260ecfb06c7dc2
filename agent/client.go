package agent

import "lazy/canary"

// Configurer is a driver whose client is pointed at the proxy by its own
// configuration rather than only by the variables Env sets (codex reads a
// model provider from its config.toml, gemini its auth from settings.json
// and its base URL from a variable of its own). The launcher asks it for
// the turn's Client before every turn, the one hook a driver has.
type Configurer interface {
	Configure(baseURL string, sandboxed bool) Client
}

// Client is what a Configurer's client is given for one turn. No real
// credential is ever in it: the key the client presents is the
// placeholder Env sets.
type Client struct {
	// Driver is the turn's driver (its argv may depend on whether lazy's
	// sandbox holds the agent); nil keeps the driver as it is.
	Driver Driver
	// Env is variables beside Env's.
	Env []string
	// Files are written into the agent's home over whatever the agent left
	// there, following no link it planted (WriteDecoys).
	Files []canary.File
}
