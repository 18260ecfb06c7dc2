package config

import "strings"

// Setup is what runs in a task's sandbox and worktree before its first
// work turn (CONTRACT §15): each command with `sh -c`, in order, with no
// model call; the first that fails fails the task.
type Setup struct {
	Run []string `koanf:"run"`
}

// MaxSetupCommands bounds [setup] run.
const MaxSetupCommands = 64

func (s Setup) validate() error {
	if len(s.Run) > MaxSetupCommands {
		return bad("setup.run", "%d commands; at most %d (join related steps with && in one command)", len(s.Run), MaxSetupCommands)
	}
	for i, c := range s.Run {
		if strings.TrimSpace(c) == "" {
			return bad("setup.run", "command %d is empty; remove it or write the command", i+1)
		}
		if strings.ContainsRune(c, 0) {
			return bad("setup.run", "command %d holds a NUL byte, which no shell command can", i+1)
		}
	}
	return nil
}
