package daemon

import (
	"context"

	"lazy/actors"
	"lazy/notify"
)

// startNotify follows this member's own task events and tells [notify]'s
// webhook and command when a task needs the reviewer, failed or tripped a
// wire (CONTRACT §17). The targets are read from the config in force at
// each notice; the review page's address is the dashboard's, with no token.
func (d *Daemon) startNotify(ctx context.Context, environ []string) error {
	base, st := d.status.get().BaseURL, d.st
	n, err := notify.New(notify.Options{
		Targets: func() notify.Targets {
			c := d.live.Get().Notify
			return notify.Targets{Webhook: c.Webhook, Command: c.CommandArgv()}
		},
		ReviewURL: func(taskID string) string { return base + "/review/" + taskID },
		Status: func(ctx context.Context, taskID string) (string, error) {
			t, err := st.GetTask(ctx, taskID)
			if err != nil {
				return "", err
			}
			return string(t.Status), nil
		},
		Dir: d.paths.Root,
		Env: notify.CommandEnv(environ),
		Log: d.log.With("part", "notify"),
	})
	if err != nil {
		return err
	}
	events, unsubscribe, err := d.sup.Subscribe(actors.Filter{Tasks: true, Local: true}, 256)
	if err != nil {
		return err
	}
	go func() {
		n.Run(ctx, events)
		unsubscribe()
	}()
	return nil
}
