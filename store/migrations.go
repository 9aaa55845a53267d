package store

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
)

// Migration is one numbered change of a backend's schema.
type Migration struct {
	Version int
	Name    string // file name, e.g. 001_init.up.sql
	SQL     string
}

// migrationName is the form of a migration file: 001_init.up.sql.
var migrationName = regexp.MustCompile(`^([0-9]+)_[a-z0-9_]+\.up\.sql$`)

// LoadMigrations reads the migrations in the "migrations" directory of fsys
// (a backend embeds its own), in order. They must be numbered from 1
// without a gap or a duplicate: anything else is an error at start, never
// a silently skipped change.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migration %s: name must look like 001_name.up.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		switch {
		case i > 0 && m.Version == ms[i-1].Version:
			return nil, fmt.Errorf("migrations %s and %s have the same number %d", ms[i-1].Name, m.Name, m.Version)
		case m.Version != i+1:
			return nil, fmt.Errorf("migration %s: number %d follows %d: migrations are numbered from 1 without gaps", m.Name, m.Version, i)
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations")
	}
	return ms, nil
}
