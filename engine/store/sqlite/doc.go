// Package sqlite is the embedded adapter of engine.Store, for a mesh with a
// single server: one database file in the node's data directory, opened
// with modernc.org/sqlite (pure Go, no cgo) through database/sql. It has the
// same tables as the Postgres adapter (see engine/store/postgres for what
// each is for, why progress is written in its order and how partitions are
// fenced) and passes the same conformance suite (engine/store/storetest).
//
// What differs, and why:
//
//   - One writer. Every write runs in a BEGIN IMMEDIATE transaction on a
//     pool of exactly one connection, so writes are serialised inside the
//     process instead of contending for SQLite's file lock. That is what
//     makes a claim atomic without SKIP LOCKED: choosing the due rows and
//     stamping the lease happen in one transaction that nothing can
//     interleave with. Reads (Get/List/TaskHistory) use a separate pool of
//     read-only connections; WAL mode lets them run while a write does.
//     It also makes the partition fence plain: FencePartitions judges and
//     writes in one write transaction, and each gated write reads the
//     partitions table in its own, so no fence falls between a check and
//     the write it allows.
//   - The clock is the process's (Config.Now, injectable for tests): there
//     is one process, so there is no clock to agree on. Times are stored as
//     microseconds since the epoch, the precision Postgres keeps.
//   - Durability: journal_mode=WAL with synchronous=FULL, so a committed
//     (acknowledged) submission survives a power cut; foreign keys on;
//     busy_timeout for a second process that opens the file.
//   - Batches are one transaction with prepared statements executed per
//     row: in-process calls cost no round trip, and the transaction commits
//     once for the whole batch (the group commit). Id lists are passed as
//     one JSON parameter and expanded with json_each. The statements that
//     run for every task or instance are prepared once, at Open, on the
//     writer's connection (stmts.go): SQLite parses a statement each time
//     it is prepared.
//   - Migrations are embedded (migrations/) and applied in one write
//     transaction at Open; STRICT tables enforce the column types.
package sqlite
