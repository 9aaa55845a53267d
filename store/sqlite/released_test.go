package sqlite

import (
	"testing"

	"github.com/schedulerd/schedulerd/store/storetest"
)

// released are the migrations that releases shipped, which never change
// (docs/development.md#releases).
var released = []storetest.Released{
	{Name: "001_init.up.sql", SHA256: "afec50d28295531cb19872b53fae9eae7cfdf27c088accd4de57765c3c9f50d6"}, // v0.1.0
}

// TestReleasedMigrationsUnchanged: every released migration is still
// embedded, byte for byte.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	storetest.CheckReleased(t, embeddedMigrations, released)
}
