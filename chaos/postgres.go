package chaos

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The replicated database's services, as docker-compose.yml names them:
// the pg_auto_failover monitor and the data nodes (one primary, two
// synchronous standbys). A data node's name on the monitor is its service
// name.
var (
	Monitor       = "monitor"
	PostgresNodes = []string{"pg1", "pg2", "pg3"}
)

// Database reaches the compose mesh's replicated Postgres from the host:
// each data node and the monitor on a port of 127.0.0.1, with the postgres
// role's password.
type Database struct {
	Password string
	// Ports are the host ports of the data nodes, in PostgresNodes' order.
	Ports []int
	// MonitorPort is the monitor's host port.
	MonitorPort int
}

// DSN is the multi-host DSN of database db on the data nodes: pgx keeps
// the one that is writable.
func (d *Database) DSN(db string) string {
	hosts := make([]string, len(d.Ports))
	for i, p := range d.Ports {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		url.QueryEscape(d.Password), strings.Join(hosts, ","), db)
}

func (d *Database) monitorDSN() string {
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/pg_auto_failover?sslmode=disable&connect_timeout=2",
		url.QueryEscape(d.Password), d.MonitorPort)
}

// Roles asks the monitor which data node is the primary and which are
// standbys (secondary, in sync). While a failover is under way there may
// be no primary: primary is then "".
func (d *Database) Roles(ctx context.Context) (primary string, standbys []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.monitorDSN())
	if err != nil {
		return "", nil, fmt.Errorf("connecting to the pg_auto_failover monitor: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	rows, err := conn.Query(ctx, `SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid`)
	if err != nil {
		return "", nil, fmt.Errorf("reading the data nodes' states from the monitor: %w", err)
	}
	var name, reported, goal string
	_, err = pgx.ForEachRow(rows, []any{&name, &reported, &goal}, func() error {
		switch {
		case reported == "primary" && goal == "primary":
			primary = name
		case reported == "secondary" && goal == "secondary":
			standbys = append(standbys, name)
		}
		return nil
	})
	return primary, standbys, err
}

// Settled waits until the monitor has a primary and want standbys in sync,
// for up to limit, and returns them.
func (d *Database) Settled(ctx context.Context, want int, limit time.Duration) (primary string, standbys []string, err error) {
	err = until(ctx, limit, fmt.Sprintf("a primary and %d synchronous standbys", want), func() (bool, error) {
		var rerr error
		primary, standbys, rerr = d.Roles(ctx)
		return rerr == nil && primary != "" && len(standbys) >= want, nil
	})
	return primary, standbys, err
}

// Replication is how the primary ships commits to its standbys.
type Replication string

// The replication modes: synchronous (pg_auto_failover's
// number_sync_standbys = 1: a commit is acknowledged once a standby has
// it), and asynchronous (no standby in the replication quorum: commits are
// acknowledged on the primary alone, as a test that the checker sees what
// a lost primary then loses).
const (
	Synchronous  Replication = "sync"
	Asynchronous Replication = "async"
)

// MakeAsynchronous takes every data node out of the replication quorum,
// through the monitor, and waits until the primary acknowledges commits
// alone (synchronous_standby_names empty).
func (d *Database) MakeAsynchronous(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.monitorDSN())
	if err != nil {
		return fmt.Errorf("connecting to the pg_auto_failover monitor: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, `SELECT pgautofailover.set_formation_number_sync_standbys('default', 0)`); err != nil {
		return fmt.Errorf("setting number_sync_standbys to 0: %w", err)
	}
	for _, n := range PostgresNodes {
		if _, err := conn.Exec(ctx, `SELECT pgautofailover.set_node_replication_quorum('default', $1, false)`, n); err != nil {
			return fmt.Errorf("taking %s out of the replication quorum: %w", n, err)
		}
	}
	return until(ctx, time.Minute, "the primary to acknowledge commits alone", func() (bool, error) {
		names, err := d.syncStandbyNames(ctx)
		return err == nil && names == "", nil
	})
}

// syncStandbyNames reads synchronous_standby_names on the primary.
func (d *Database) syncStandbyNames(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, d.DSN("robonet"))
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var names string
	err = conn.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&names)
	return names, err
}
