package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/api"
	"lazy/proxy"
)

// GrantsActor owns the grant registry file. It is its only writer; after each
// change it publishes an immutable snapshot that the proxy reads per request
// without a round trip through the mailbox.
type GrantsActor struct {
	path     string
	snapshot *atomic.Pointer[proxy.Grants]
	log      *slog.Logger
	grants   proxy.Grants
}

// NewGrantsActor returns the producer; snapshot is shared with the proxy.
func NewGrantsActor(path string, snapshot *atomic.Pointer[proxy.Grants], log *slog.Logger) actor.Producer {
	return func() actor.Actor { return &GrantsActor{path: path, snapshot: snapshot, log: log} }
}

// Receive handles one message.
func (g *GrantsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		gs, err := proxy.LoadGrants(g.path)
		if err != nil {
			g.log.Error("load grants", "err", err)
			gs = proxy.Grants{}
		}
		g.grants = gs
		if _, err := os.Stat(g.path); errors.Is(err, os.ErrNotExist) {
			// the registry exists from the start, 0600, even when empty
			if err := gs.Save(g.path); err != nil {
				g.log.Error("create grant registry", "err", err)
			}
		}
		g.publish()
	case *MintGrants:
		env, err := g.mint(m)
		if err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(&Minted{Env: env})
	case *RevokeTask:
		next := proxy.Grants{}
		for k, v := range g.grants {
			if v.TaskID != m.TaskID {
				next[k] = v
			}
		}
		if err := next.Save(g.path); err != nil {
			ctx.Respond(fmt.Errorf("revoke grants: %w", err))
			return
		}
		g.grants = next
		g.publish()
		ctx.Respond(&Done{})
	case *GetHealth:
		ctx.Respond(api.ActorHealth{Name: "grants", Kind: "grants", Queued: []string{}, Responsive: true})
	case *InjectPanic:
		panic("injected: " + m.Reason)
	}
}

// mint reuses a live grant for the same (role, task, env var), so a task keeps
// one placeholder per variable across turns and daemon restarts.
func (g *GrantsActor) mint(m *MintGrants) (map[string]string, error) {
	next := proxy.Grants{}
	for k, v := range g.grants {
		next[k] = v
	}
	env := map[string]string{}
	changed := false
	for envVar, mv := range m.Vars {
		found := ""
		for k, v := range next {
			if v.TaskID == m.TaskID && v.Role == m.Role && v.EnvVar == envVar {
				found = k
			}
		}
		if found != "" {
			env[envVar] = found
			continue
		}
		var ph string
		if mv.Kind == "editor" {
			ph = proxy.NewEditorPlaceholder()
		} else {
			ph = proxy.NewPlaceholder(mv.Kind, mv.ShapeOf)
		}
		next[ph] = proxy.Grant{Placeholder: ph, Role: m.Role, TaskRef: m.TaskRef, TaskID: m.TaskID, EnvVar: envVar, Local: m.Local, CreatedAt: time.Now().UTC()}
		env[envVar] = ph
		changed = true
	}
	if changed {
		if err := next.Save(g.path); err != nil {
			return nil, fmt.Errorf("save grants: %w", err)
		}
		g.grants = next
		g.publish()
	}
	return env, nil
}

func (g *GrantsActor) publish() {
	snap := make(proxy.Grants, len(g.grants))
	for k, v := range g.grants {
		snap[k] = v
	}
	g.snapshot.Store(&snap)
}
