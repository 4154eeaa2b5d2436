package client

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Describe renders an error from a call for a person: the status code and
// message on the first line, then one indented line per detail the server
// attached (every spec problem with file:line:col and task, every invalid
// input or field). addr names the node for connection errors.
func Describe(err error, addr string) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	var b strings.Builder
	switch st.Code() {
	case codes.Unavailable:
		fmt.Fprintf(&b, "cannot reach robonode at %s (is it running? set --addr or ROBONET_ADDR): %s", addr, st.Message())
	case codes.DeadlineExceeded:
		fmt.Fprintf(&b, "robonode at %s did not answer in time: %s", addr, st.Message())
	default:
		fmt.Fprintf(&b, "%s (%s)", st.Message(), codeName(st.Code()))
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *robonetv1.SpecErrors:
			for _, e := range d.GetErrors() {
				b.WriteString("\n  " + e.GetText())
			}
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				if v.GetField() != "" {
					b.WriteString("\n  " + v.GetField() + ": " + v.GetDescription())
				} else {
					b.WriteString("\n  " + v.GetDescription())
				}
			}
		case *errdetails.PreconditionFailure:
			for _, v := range d.GetViolations() {
				b.WriteString("\n  " + v.GetDescription())
			}
		}
	}
	return b.String()
}

// IsCode reports whether err is a gRPC status with code c.
func IsCode(err error, c codes.Code) bool {
	var se interface{ GRPCStatus() *status.Status }
	return errors.As(err, &se) && se.GRPCStatus().Code() == c
}

// codeName spells a status code the way the gRPC docs do: NOT_FOUND.
func codeName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
