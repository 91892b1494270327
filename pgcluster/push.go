package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/jackc/pgx/v5"
)

// PushConfigs returns the cluster's push.ConfigStore (for
// a2asrv.WithPushNotifications): the push-notification configurations of
// tasks in a table of their own (a2a_cluster_push_configs), so that the
// instance executing a task finds the configurations a client set on
// another. The cleaner drops those of ended tasks with their events.
func (c *Cluster) PushConfigs() push.ConfigStore { return &pushStore{c: c} }

type pushStore struct{ c *Cluster }

var _ push.ConfigStore = (*pushStore)(nil)

// Save implements push.ConfigStore. A config without ID gets one; a
// config with the ID of one the task has replaces it. A config without a
// valid endpoint URL is refused with a2a.ErrInvalidParams and nothing is
// stored.
func (s *pushStore) Save(ctx context.Context, taskID a2a.TaskID, config *a2a.PushConfig) (*a2a.PushConfig, error) {
	if config == nil || config.URL == "" {
		return nil, fmt.Errorf("pgcluster: push config without endpoint: %w", a2a.ErrInvalidParams)
	}
	if _, err := url.ParseRequestURI(config.URL); err != nil {
		return nil, fmt.Errorf("pgcluster: push config endpoint is not a URL: %w", a2a.ErrInvalidParams)
	}
	saved := *config
	if saved.ID == "" {
		saved.ID = newToken()
	}
	saved.TaskID = taskID
	body, err := json.Marshal(&saved)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: encode push config: %w", err)
	}
	if _, err := s.c.pool.Exec(ctx, s.c.sql.savePush, string(taskID), saved.ID, body); err != nil {
		return nil, fmt.Errorf("pgcluster: save push config: %w", err)
	}
	return &saved, nil
}

// Get implements push.ConfigStore; push.ErrPushConfigNotFound when the
// task has no config configID.
func (s *pushStore) Get(ctx context.Context, taskID a2a.TaskID, configID string) (*a2a.PushConfig, error) {
	var body []byte
	err := s.c.pool.QueryRow(ctx, s.c.sql.getPush, string(taskID), configID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, push.ErrPushConfigNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgcluster: get push config: %w", err)
	}
	return decodePush(body)
}

// List implements push.ConfigStore, oldest first.
func (s *pushStore) List(ctx context.Context, taskID a2a.TaskID) ([]*a2a.PushConfig, error) {
	rows, err := s.c.pool.Query(ctx, s.c.sql.listPush, string(taskID))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: list push configs: %w", err)
	}
	defer rows.Close()
	configs := []*a2a.PushConfig{}
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("pgcluster: list push configs: %w", err)
		}
		pc, err := decodePush(body)
		if err != nil {
			return nil, err
		}
		configs = append(configs, pc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgcluster: list push configs: %w", err)
	}
	return configs, nil
}

// Delete implements push.ConfigStore (deleting a missing config is not an
// error, as in a2a-go's in-memory store).
func (s *pushStore) Delete(ctx context.Context, taskID a2a.TaskID, configID string) error {
	if _, err := s.c.pool.Exec(ctx, s.c.sql.deletePush, string(taskID), configID); err != nil {
		return fmt.Errorf("pgcluster: delete push config: %w", err)
	}
	return nil
}

// DeleteAll implements push.ConfigStore.
func (s *pushStore) DeleteAll(ctx context.Context, taskID a2a.TaskID) error {
	if _, err := s.c.pool.Exec(ctx, s.c.sql.deleteAllPush, string(taskID)); err != nil {
		return fmt.Errorf("pgcluster: delete push configs: %w", err)
	}
	return nil
}

func decodePush(body []byte) (*a2a.PushConfig, error) {
	var pc a2a.PushConfig
	if err := json.Unmarshal(body, &pc); err != nil {
		return nil, fmt.Errorf("pgcluster: decode push config: %w", err)
	}
	return &pc, nil
}
