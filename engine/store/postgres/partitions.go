package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// lockPartitionsSQL reads and row-locks the stored rows of the partitions
// of $1, in partition order: two fences of overlapping sets take their
// locks in one order and cannot deadlock, and a fence of a partition
// waits for another one's commit before it judges the partition.
const lockPartitionsSQL = `-- name: fence_lock
SELECT partition, owner, epoch, fenced_at
FROM partitions
WHERE partition = ANY($1::integer[])
ORDER BY partition
FOR UPDATE`

// fenceSQL writes owner $2 at the epochs $3 of the partitions $1 (sorted),
// over a stored row only of a lower epoch. It returns the partitions it
// wrote. A row it did not write was inserted by a concurrent fence after
// lockPartitionsSQL looked (INSERT … ON CONFLICT waited for its commit);
// the caller judges it again.
const fenceSQL = `-- name: fence_write
INSERT INTO partitions AS pt (partition, owner, epoch, fenced_at)
SELECT p.partition, $2, p.epoch, now()
FROM unnest($1::integer[], $3::bigint[]) AS p(partition, epoch)
ORDER BY p.partition
ON CONFLICT (partition) DO UPDATE
SET owner = excluded.owner, epoch = excluded.epoch, fenced_at = excluded.fenced_at
WHERE pt.epoch < excluded.epoch
RETURNING pt.partition`

// FencePartitions implements port.Store in one transaction: lock the
// stored rows, judge every partition (one stale partition fails the call
// before anything is written), write the ones to take, and judge again
// those that a concurrent fence inserted meanwhile.
func (s *Store) FencePartitions(ctx context.Context, req port.FenceRequest) error {
	parts, err := storeutil.CheckFence(req)
	if err != nil || len(parts) == 0 {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		stored, err := lockPartitions(ctx, tx, int32s(parts))
		if err != nil {
			return err
		}
		var (
			take   []int32
			epochs []int64
		)
		for _, p := range parts {
			var row *port.PartitionOwner
			if got, ok := stored[p]; ok {
				row = &got
			}
			switch storeutil.JudgeFence(row, req.Owner, req.Epochs[p]) {
			case storeutil.FenceStale:
				return storeutil.ErrStaleEpoch(*row, req.Epochs[p])
			case storeutil.FenceTake:
				epoch, _ := storeutil.Epoch(req.Epochs[p]) // checked by CheckFence
				take, epochs = append(take, int32(p)), append(epochs, epoch)
			}
		}
		if len(take) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, fenceSQL, take, req.Owner, epochs)
		if err != nil {
			return err
		}
		written, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		var raced []int32
		for _, p := range take {
			if !slices.Contains(written, p) {
				raced = append(raced, p)
			}
		}
		if len(raced) == 0 {
			return nil
		}
		now, err := lockPartitions(ctx, tx, raced)
		if err != nil {
			return err
		}
		for _, p := range raced {
			row, ok := now[int(p)]
			if !ok {
				return fmt.Errorf("partition %d: neither written nor stored", p) // rows are never deleted
			}
			if storeutil.JudgeFence(&row, req.Owner, req.Epochs[int(p)]) != storeutil.FenceKeep {
				return storeutil.ErrStaleEpoch(row, req.Epochs[int(p)])
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fence %d partitions for %s: %w", len(parts), req.Owner, s.check(ctx, err))
	}
	return nil
}

// Partitions implements port.Store.
func (s *Store) Partitions(ctx context.Context) ([]port.PartitionOwner, error) {
	const q = `-- name: partitions
		SELECT partition, owner, epoch, fenced_at FROM partitions ORDER BY partition`
	rows, err := s.pool.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read partitions: %w", s.check(ctx, err))
	}
	out, err := pgx.CollectRows(rows, scanPartition)
	if err != nil {
		return nil, fmt.Errorf("read partitions: %w", s.check(ctx, err))
	}
	return out, nil
}

// lockPartitions reads and locks the stored rows of parts (sorted), by
// partition.
func lockPartitions(ctx context.Context, tx pgx.Tx, parts []int32) (map[int]port.PartitionOwner, error) {
	rows, err := tx.Query(ctx, lockPartitionsSQL, parts)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanPartition)
	if err != nil {
		return nil, err
	}
	out := make(map[int]port.PartitionOwner, len(list))
	for _, p := range list {
		out[p.Partition] = p
	}
	return out, nil
}

func scanPartition(row pgx.CollectableRow) (port.PartitionOwner, error) {
	var (
		p     port.PartitionOwner
		part  int32
		owner uuid.UUID
		epoch int64
	)
	err := row.Scan(&part, &owner, &epoch, &p.FencedAt)
	p.Partition, p.Owner, p.Epoch = int(part), owner, uint64(epoch) // the column's CHECK keeps it positive
	p.FencedAt = p.FencedAt.UTC()
	return p, err
}

// int32s converts partition numbers (checked to be below MaxPartitions)
// to the integer column's type.
func int32s(parts []int) []int32 {
	out := make([]int32, len(parts))
	for i, p := range parts {
		out[i] = int32(p)
	}
	return out
}
