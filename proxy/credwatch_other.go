//go:build !linux

package proxy

type dirWatch struct{}

func newDirWatch(*CredentialFile, string) *dirWatch { return nil }

func (*dirWatch) changed() bool { return true }

func (*dirWatch) pending() bool { return true }
