package embedded

import (
	"database/sql"
	"fmt"
	"slices"

	// The SQLite driver the server's plugin registers, named here because
	// this file opens the database itself.
	_ "modernc.org/sqlite"
)

// keptVisibilityIndexes are the indexes of the visibility table that the
// embedded server keeps: the order every list is read in, and the fields
// nid's own lists (workflow type, status, task queue) and the Web UI's
// lookups (workflow id) filter on.
//
// The server's SQLite schema indexes 58 fields, the pre-allocated search
// attributes and the system ones (schedules, batches, deployments) among
// them, and every visibility write (a session started, its listing
// written) updated each of those indexes, twice for a replace: it was a
// fifth of the processor time of 1,000 new sessions starting, on the one
// connection every write of the server waits for. One host's visibility
// table holds its sessions' runs, open and closed within the retention:
// thousands to tens of thousands of rows, which a query on another field
// (a search attribute typed in the Web UI) reads through.
var keptVisibilityIndexes = []string{"default_idx", "by_workflow_id", "by_workflow_type", "by_status", "by_task_queue"}

// dropUnusedVisibilityIndexes drops every index of the visibility table in
// the SQLite database file but keptVisibilityIndexes, in a new database and
// in one an older nid made alike. It must run before the server opens file.
func dropUnusedVisibilityIndexes(file string) (err error) {
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	indexes, err := visibilityIndexes(db)
	if err != nil {
		return err
	}
	unused := slices.DeleteFunc(indexes, func(name string) bool { return slices.Contains(keptVisibilityIndexes, name) })
	for _, name := range unused {
		// The name comes from the database's own catalogue; quoted, as
		// an identifier, all the same.
		if _, err := db.Exec(fmt.Sprintf("DROP INDEX IF EXISTS %q", name)); err != nil {
			return err
		}
	}
	return nil
}

// visibilityIndexes names the indexes of the visibility table but SQLite's
// own (a primary key's), which have no SQL.
func visibilityIndexes(db *sql.DB) ([]string, error) {
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}
