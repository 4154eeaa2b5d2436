// Package postgres is the Postgres adapter of engine.Store (pgx/v5): the
// durable state of a mesh with several server nodes. Open connects, applies
// the embedded migrations and returns a Store; the conformance suite in
// engine/store/storetest pins its behaviour to the SQLite adapter's.
//
// # Schema, table by table
//
// migrations/ holds the schema, one numbered file per change
// (0001_initial.sql the tables below); Open applies what is missing in one
// transaction under a per-schema advisory lock
// (pg_advisory_xact_lock), so nodes that start together apply each
// migration once and the rest wait, then find nothing to do. Postgres DDL is
// transactional: a failed migration leaves nothing behind. Applied versions
// are recorded in schema_migrations.
//
//   - workflow_versions: immutable workflow IR, keyed by (workflow_name,
//     workflow_version), with ir_hash. Registration is INSERT … ON CONFLICT
//     DO NOTHING, then the stored row is read back: the same hash is a no-op,
//     another hash is ErrVersionConflict.
//
//   - runner_instances: one row per instance for its whole life: status,
//     inputs, the latest state snapshot, output or error, the optional
//     idempotency key (unique where not null), cancel_requested, paused,
//     runs (1, one more per ReopenInstance), and the created/started/
//     finished timestamps. Finished rows stay, queryable, until the
//     retention sweep deletes them.
//
//   - queued_instances: the claim table, one row per live instance:
//     scheduled_at (when it is next due), the lease — lock_uuid (owner) and
//     lock_expires_at — the Raft term of the owner (the fencing token),
//     cancel_requested, the instance's partition (0 for rows queued
//     before partitions) and wake, a counter every signal, pause, resume
//     and cancellation request bumps (see "Parks" below). Completion deletes the row, so this table is as
//     small as the live work and claims stay cheap. scheduled_at and
//     lock_uuid are indexed, lock_expires_at is not, so lease refreshes,
//     the most frequent write, are HOT updates.
//
//   - partitions: one row per fenced partition — its owner (a runloop's
//     lock id), the epoch it fenced at, and when (see "Partitions" below).
//
//   - runner_actions_done: the append-only log of finished attempts, one row
//     per (instance_id, execution_id, attempt), unique — a result is recorded
//     once, a replay is ignored (ON CONFLICT DO NOTHING). The bigserial id
//     gives the recording order (TaskHistory). The unique index is ordered
//     (instance, execution, attempt DESC), which is exactly the order of the
//     hydration query, so hydration reads the latest attempt of every
//     execution straight off the index.
//
//   - instance_signals: the signals sent to an instance, by bigserial seq:
//     name, payload, an idempotency key unique per instance, and
//     consumed_by (the attempt that took it; NULL while nobody did). They
//     go with their instance (ON DELETE CASCADE).
//
//   - workflow_schedules: recurring schedule definitions and run metadata,
//     unique by (workflow_name, schedule_name). Table only: the Store port
//     has no schedule methods yet.
//
//   - worker_status: per-pool, per-worker throughput and latency snapshots.
//     Table only: no port methods yet.
//
// Text columns that are sorted or compared (names, execution ids, keys) use
// COLLATE "C": byte order on every server, whatever its locale, and the same
// order as SQLite's. The migration also tunes autovacuum for the three hot
// tables (queued_instances: vacuum after ~1% dead rows, unthrottled, fill
// factor 70 for HOT updates; runner_instances: fill factor 80 and an eager
// TOAST vacuum for snapshot churn; runner_actions_done: insert-triggered
// vacuum to keep the visibility map current).
//
// # Claims
//
// ClaimInstances is one pgx batch (one round trip, one transaction) of three
// statements. The first picks due rows (scheduled_at <= now()) that are
// unlocked, whose lease expired, or whose lease is held under an older
// term — in the claimer's partitions if it names them, never in a
// partition fenced by another runloop, and in one fenced by the claimer
// whatever lease another holds — oldest first, FOR UPDATE SKIP LOCKED — concurrent claimers on
// several nodes take disjoint rows instead of queueing behind each other —
// stamps lock_uuid, lock_expires_at = now() + lease and the claimer's term,
// marks the runner rows running and returns their inputs and snapshots. The
// second returns the latest result of every execution of those instances
// (DISTINCT ON (instance_id, execution_id) … ORDER BY instance_id,
// execution_id, attempt DESC, id DESC). The third returns their
// unconsumed signals, reading instance_signals only for rows whose wake
// counter is above zero (never signalled: no probe).
//
// Hydration is a statement of its own, not a subquery of the claim, on
// purpose: in READ COMMITTED a statement reads with the snapshot taken when
// it started, while its row locks see the latest row versions. A row that
// its previous owner filled with results and released while the claim was
// running would be claimed with results missing. The second statement's
// snapshot is taken after the claim holds its locks, when every write of a
// previous owner is either committed or bound to be refused.
// TestConcurrentClaimersNeverOverlap catches the difference.
//
// A claimer of a newer term takes over live leases of older terms at once:
// a new Raft leader need not wait for its deposed predecessor's leases to
// lapse, and the predecessor's writes are refused from that moment.
//
// # Progress, and why the writes come in this order
//
// PersistProgress sends one statement: one round trip and one implicit
// transaction, whatever the number of instances (group commit). Each step
// is a multi-row part of it (a CTE) over unnest()ed arrays, never a
// statement per row:
//
//  1. `owned`: lock the queue rows the caller may still write (lock_uuid =
//     owner AND lock_expires_at > now(), in a partition no other runloop
//     fenced; FOR NO KEY UPDATE, in id order). The lock keeps a concurrent
//     claim from taking an instance over before the statement commits.
//  2. Append the action results of exactly the owned instances, and mark
//     the signals they consumed.
//  3. Write their state snapshots.
//  4. Write their next scheduled_at, or park them.
//
// One statement rather than a batch of them because the gate reads the
// partitions table, which no row lock of the batch protects: statements of
// their own would each read it afresh (READ COMMITTED), and a fence
// committed between two of them would leave an instance's results written
// and its snapshot refused while the batch reported it owned. In one
// statement the lease and the fence are read with one snapshot.
//
// Results come first because they are the facts the snapshot is derived
// from, and the log is append-only and idempotent: if a runloop writes its
// results in one batch and dies before the snapshot that includes them
// reaches the database, the next owner hydrates the older snapshot plus
// those results and reaches the same state — no result is lost, none is
// recorded twice. The snapshot comes before the schedule because the
// schedule only says when to look at the instance next; a due time without
// the state that produced it would wake an owner to a stale instance. Here
// all three land atomically anyway (one statement), and the order still
// states the dependency for writers that split them across batches.
//
// Every write is gated on the lease, including the results: a deposed or
// expired owner can neither overwrite live state nor add results, and its
// per-instance outcome is ErrOwnershipLost (nothing of that instance was
// written; the rest of its batch is unaffected). It must drop the instance
// from memory.
//
// CompleteInstances follows the same pattern in one statement: final
// results, then status, output, error, final snapshot and finished_at on
// runner_instances, then the deletion of the queue row — all gated on
// `owned`.
//
// # Parks
//
// An instance that only waits (for a signal, a duration, a time) is
// parked by its owner with its progress (engine.Park): the same UPDATE of
// the queue row releases the lease and sets scheduled_at to now() if the
// row's wake counter is above the one the owner acted on or a
// cancellation was requested, else to the deadline ('infinity' for none).
// The comparison reads the row being updated, not a subquery: a signal
// (pause, cancellation) that commits while the park waits for the row's
// lock is seen, because an UPDATE that finds its row changed since its
// snapshot evaluates its SET on the newest version (READ COMMITTED), while
// a subquery reads the snapshot. A signal that comes after the park waits
// for the lock in turn and finds the row parked, which it makes due.
// RecordSignals (and RecordSignal, a batch of one) locks the queue rows of
// its instances, in id order as `owned` does, before it reads the
// idempotency keys or counts unconsumed signals, so recordings and
// consumptions of one instance are ordered, and batches that share
// instances take turns rather than deadlock. TestParkSeesAWakeCommittedWhileItWaits holds the
// first case, and fails with a subquery.
//
// # Partitions
//
// Every instance belongs to one partition for life (engine.PartitionOf its
// id), kept in queued_instances.partition. FencePartitions makes a runloop
// the owner of partitions at epochs, in one transaction: it locks their
// rows (SELECT … FOR UPDATE, in partition order, so two fences serialise
// and cannot deadlock), refuses the whole call with ErrStaleEpoch if any
// partition is stored at a higher epoch or at the same epoch by another
// owner, and writes the rest (INSERT … ON CONFLICT … WHERE the stored epoch
// is lower; a row that a concurrent fence inserted meanwhile is judged
// again). From its commit on, every write gate — claims, `owned`, lease
// refreshes, submissions stored claimed — refuses a runloop other than the
// owner, however live its lease: Temporal's range_id check, in the same
// statement as the lease check. The owner's claims take the partition's
// rows whatever lease another runloop holds on them. A partition without
// a row is gated by leases and terms alone.
//
// A write whose statement read the partitions table just before a fence
// committed may still commit after it. That is harmless: the new owner
// touches the instance only by claiming it, and the claim's row lock waits
// for (or skips) the write's lock on the queue row, so the owner hydrates
// everything the old one wrote, and nothing the old one writes later.
//
// # Queueing
//
// QueueInstances inserts the runner rows and the queue rows in one
// statement inside one transaction and returns only after the commit: an
// acknowledged submission is durable, and a connection that dies before the
// commit leaves neither row (there is never a queue row without its runner
// row, nor the reverse). Idempotency keys are enforced by the unique index;
// a key already used for the same workflow version returns the existing
// instance (Existing), for another version ErrIdempotencyConflict.
//
// # Leases and housekeeping
//
// RefreshLeases extends live leases still held by the owner (and reports
// the lost ones and the ones with a cancel request); ReleaseLeases gives
// them up on clean shutdown; ReclaimExpired clears lapsed leases in bounded
// batches (claims take expired leases anyway; clearing them keeps the table
// honest for observers). RequestCancel flags the instance, bumps its wake
// counter and makes it due now. Sweep deletes finished instances older than
// a cut-off in bounded batches; their action results and signals go with
// them (ON DELETE CASCADE). ReopenInstance runs a failed or cancelled
// instance again: the runner row rewritten and a queue row inserted in one
// transaction.
//
// Every statement starts with a "-- name: …" comment, which shows up in
// pg_stat_statements, in server logs and in query tracers.
package postgres
