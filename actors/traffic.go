package actors

import (
	"lazy/api"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Filter selects the events a watcher gets. Task filters are resolved by the
// daemon before subscribing (spec §6.2): IDs holds full ids and Refs the
// refs grants carry, so traffic attributed by ref matches too.
type Filter struct {
	Net   bool // include proxy traffic
	Tasks bool // include task events
	// Transcript includes the running turns' transcript events (with
	// Tasks): the proxy reads replies for them only while one asks
	Transcript bool
	IDs        map[string]bool
	Refs       map[string]bool
	// Local leaves out the events other members of a cluster published:
	// what each member tells of its own tasks is its own (notify)
	Local bool
}

// Match reports whether e passes the filter.
func (f Filter) Match(e api.Event) bool {
	if e.Kind == api.EventNet && !f.Net {
		return false
	}
	if e.Kind != api.EventNet && !f.Tasks {
		return false
	}
	if e.Kind == api.EventTranscript && !f.Transcript {
		return false
	}
	if len(f.IDs) == 0 && len(f.Refs) == 0 || e.Kind == api.EventConfig {
		return true // a config change concerns every task
	}
	return (e.TaskID != "" && f.IDs[e.TaskID]) || (e.TaskRef != "" && f.Refs[e.TaskRef])
}

type subscriber struct {
	filter Filter
	ch     chan<- api.Event
}

// TrafficHub fans events out to watchers. A slow watcher loses events (and
// they are counted) rather than slowing the proxy or the task actors.
type TrafficHub struct {
	subs    map[string]subscriber
	Dropped *atomic.Int64
}

// NewTrafficHub returns the hub's producer; dropped counts lost events.
func NewTrafficHub(dropped *atomic.Int64) actor.Producer {
	return func() actor.Actor { return &TrafficHub{subs: map[string]subscriber{}, Dropped: dropped} }
}

// Receive handles one message.
func (h *TrafficHub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Subscribe:
		h.subs[m.ID] = subscriber{filter: m.Filter, ch: m.Ch}
		if ctx.Sender() != nil {
			ctx.Respond(&Done{})
		}
	case *Unsubscribe:
		delete(h.subs, m.ID)
		if ctx.Sender() != nil {
			ctx.Respond(&Done{})
		}
	case *Publish:
		for _, s := range h.subs {
			if !s.filter.Match(m.Event) || m.Remote && s.filter.Local {
				continue
			}
			select {
			case s.ch <- m.Event:
			default:
				h.Dropped.Add(1)
			}
		}
	case *GetHealth:
		ctx.Respond(api.ActorHealth{Name: "traffic", Kind: "traffic", Queued: []string{}, Responsive: true})
	case *InjectPanic:
		panic("injected: " + m.Reason)
	}
}
