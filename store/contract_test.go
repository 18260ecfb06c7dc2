package store_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"lazy/client"
	"lazy/httpapi"
	"lazy/store"
	"lazy/store/storetest"
)

func TestSQLContract(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) store.Store {
				s, err := store.OpenSQL(filepath.Join(dir, "lazy.db"), store.WithSync(sync))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			})
		})
	}
}

func TestFileContract(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) store.Store {
				s, err := store.OpenFile(filepath.Join(dir, "store"), store.WithSync(sync))
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

// TestRemoteContract runs the contract through the real storage RPC: the
// daemon's echo handler over an SQL store, called by the RPC client.
func TestRemoteContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.Store {
		backing, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
		if err != nil {
			t.Fatal(err)
		}
		e, err := httpapi.New(httpapi.Deps{Token: "tok", Storage: backing})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e)
		t.Cleanup(func() { srv.Close(); _ = backing.Close() })
		return store.NewRemote(&client.Client{Base: srv.URL, Token: "tok", HTTP: http.DefaultClient})
	})
}
