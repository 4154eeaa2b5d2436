package client

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/robonet/robonet/internal/audit"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Audit is r as a record of the node's file (DATA_DIR/audit), for -o json
// and -o yaml: the same fields under the same names.
func Audit(r *robonetv1.AuditRecord) audit.Record {
	return audit.Record{
		Time: r.GetTime().AsTime().UTC(), Node: r.GetNode(), TokenName: r.GetTokenName(), Role: r.GetRole(), Peer: r.GetPeer(),
		Method: r.GetMethod(), Target: r.GetTarget(), Outcome: r.GetOutcome(),
		DurationMS: float64(r.GetDuration().AsDuration().Microseconds()) / 1000,
	}
}

// PrintAudit writes audit records as a table, oldest first; METHOD is the
// method's name without its service.
func PrintAudit(w io.Writer, records []*robonetv1.AuditRecord) {
	if len(records) == 0 {
		fmt.Fprintln(w, "no audit records")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tNODE\tTOKEN\tROLE\tPEER\tMETHOD\tTARGET\tOUTCOME")
	for _, r := range records {
		method := r.GetMethod()
		method = method[strings.LastIndexByte(method, '/')+1:]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.GetTime().AsTime().UTC().Format("2006-01-02T15:04:05.000Z"),
			r.GetNode(), dash(r.GetTokenName()), dash(r.GetRole()), dash(r.GetPeer()), method, dash(r.GetTarget()), r.GetOutcome())
	}
	_ = tw.Flush()
}
