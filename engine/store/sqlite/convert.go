package sqlite

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Times are stored as INTEGER microseconds since the Unix epoch, UTC: the
// precision Postgres keeps, so both adapters round-trip the same values.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros maps the zero time to NULL.
func nullMicros(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: !t.IsZero()}
}

// timeOf maps NULL to the zero time.
func timeOf(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMicros(n.Int64)
}

// timePtr maps NULL to nil.
func timePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMicros(n.Int64)
	return &t
}

// idList encodes ids as a JSON array for `IN (SELECT value FROM
// json_each(?))`: one parameter however many ids, no statement per size.
func idList(ids []uuid.UUID) string {
	b, _ := json.Marshal(ids) // uuid.UUID marshals as its string form; cannot fail
	return string(b)
}

// partitionList encodes partition numbers as a JSON array, as idList does
// ids.
func partitionList(parts []int) string {
	b, _ := json.Marshal(parts) // cannot fail
	return string(b)
}
