package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/a2astore/a2astore/engine"
)

// backupPath is where the metrics listener takes a Pebble checkpoint
// under -backup-dir (SPEC X1: a backup taken while the server runs):
// POST /backup?name=NAME answers 201 and {"path": DIR} once the
// checkpoint is complete, 409 when NAME exists, 400 for a name that is not
// one plain path element. a2astore-admin backup -server calls it.
const backupPath = "/backup"

// checkpointer is a backend that takes consistent copies of itself while
// it serves (pebblestore).
type checkpointer interface {
	Checkpoint(dir string) error
}

// backupName is what a backup's name may be: one path element, never "."
// or "..", so a caller cannot write outside -backup-dir.
var backupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// checkBackupDir refuses -backup-dir over a backend that cannot take
// checkpoints, or without the metrics listener that serves them.
func checkBackupDir(cfg *config, backend any) error {
	if cfg.BackupDir == "" {
		return nil
	}
	if _, ok := backend.(checkpointer); !ok {
		return fmt.Errorf("-backup-dir needs -backend pebble (PostgreSQL is backed up with its own tools)")
	}
	if cfg.MetricsAddr == "" {
		return errors.New("-backup-dir needs the metrics listener (-metrics), which serves " + backupPath)
	}
	return nil
}

// handleBackup serves backupPath on mm when -backup-dir is set.
func (s *server) handleBackup(mm *http.ServeMux) {
	cp, ok := s.backend.(checkpointer)
	if s.cfg.BackupDir == "" || !ok {
		return
	}
	mm.HandleFunc("POST "+backupPath, func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		if name == "" {
			name = "a2astore-" + time.Now().UTC().Format("20060102T150405.000000Z")
		}
		if !backupName.MatchString(name) {
			http.Error(w, "name: one path element of letters, digits, '.', '_' and '-'", http.StatusBadRequest)
			return
		}
		dir := filepath.Join(s.cfg.BackupDir, name)
		start := time.Now()
		err := s.checkpoint(cp, dir)
		switch {
		case errors.Is(err, engine.ErrInvalidArgument):
			http.Error(w, "a backup of that name exists", http.StatusConflict)
			return
		case err != nil:
			s.cfg.Logger.Error("backup failed", "dir", dir, "err", err)
			http.Error(w, "backup failed (see the server's log)", http.StatusInternalServerError)
			return
		}
		s.cfg.Logger.Info("backup taken", "dir", dir, "took", time.Since(start))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"path": dir})
	})
}

// checkpoint takes the backup in dir: with push delivery on Pebble, the
// outbox's checkpoint first, beside it in dir.push (where a2astore-admin
// restore finds it), so that a record's Delivered never exceeds its
// task's revision in the backup; then the store's. A name whose
// directory or outbox directory exists is refused (ErrInvalidArgument)
// before anything is written; a failed store checkpoint removes the
// outbox's.
func (s *server) checkpoint(cp checkpointer, dir string) error {
	if s.checkpointOutbox == nil {
		return cp.Checkpoint(dir)
	}
	push := dir + ".push"
	for _, d := range []string{dir, push} {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("backup %s: %w", d, engine.ErrInvalidArgument)
		}
	}
	if err := s.checkpointOutbox(push); err != nil {
		return err
	}
	if err := cp.Checkpoint(dir); err != nil {
		_ = os.RemoveAll(push)
		return err
	}
	return nil
}
