package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"testing"

	"github.com/schedulerd/schedulerd/store"
)

// Released is a migration that a release shipped: its file name and the
// SHA-256 of its text.
type Released struct {
	Name   string
	SHA256 string
}

// CheckReleased fails t unless every released migration is still among
// the migrations of fsys (a backend's embedded files), byte for byte.
// A released migration has run on databases that will never run it
// again: a change to it would leave them with another schema than a new
// database gets. A change to the schema is a new migration.
func CheckReleased(t *testing.T, fsys fs.FS, released []Released) {
	t.Helper()
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]store.Migration{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	for _, r := range released {
		m, ok := byName[r.Name]
		if !ok {
			t.Errorf("released migration %s is gone: a released migration stays forever", r.Name)
			continue
		}
		sum := sha256.Sum256([]byte(m.SQL))
		if got := hex.EncodeToString(sum[:]); got != r.SHA256 {
			t.Errorf("released migration %s changed (sha256 %s, released %s): undo the change and write it as a new migration (docs/development.md#releases)", r.Name, got, r.SHA256)
		}
	}
}
