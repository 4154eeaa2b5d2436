package remote

import (
	"errors"
	"io"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// handshake is the server side of a stream's opening, the steps that the
// WagService's Lead and Work streams and the WorkerService's Serve stream
// take alike, in this order (accept):
//
//  1. the first request holds the protocol's opening (opening), or the
//     stream is refused: INVALID_ARGUMENT, missing;
//  2. the protocol admits it (admit): its limits, the caller, what it
//     claims — an error refuses the stream as it is;
//  3. the stream gets its sender (send; its logs name the stream: name);
//  4. the protocol sets up what the opening asks for, with that sender
//     (setUp), and says its welcome;
//  5. the welcome is the stream's first response.
//
// What each step requires, and the errors that refuse a stream, are the
// protocol's. What a step sets up that lasts as long as the stream (a
// count of streams, a session, a pool) it returns an undo for: the undos
// and the sender's close run in reverse when the stream ends (see
// opened.close), or when a later step of the handshake fails.
type handshake[Req any, Open comparable, Resp proto.Message] struct {
	// opening is the opening within a request; the zero Open when there
	// is none.
	opening func(Req) Open
	// missing is the refusal of a stream whose first request holds no
	// opening: how the protocol's streams start.
	missing string
	// admit judges the opening, and first, the request holding it, before
	// the stream gets a sender.
	admit func(first Req, open Open) (undo func(), err error)
	// send sends on the stream.
	send func(Resp) error
	// log is the server's logger; name names the stream in its sender's.
	log  *zap.Logger
	name func(Open) string
	// setUp sets up what the opening asks for, sending on out, and
	// returns the stream's first response.
	setUp func(open Open, out *sender[Resp]) (welcome Resp, undo func(), err error)
}

// opened is a stream past its handshake: its opening and its sender.
type opened[Open any, Resp proto.Message] struct {
	open Open
	out  *sender[Resp]
	undo []func() // what the handshake set up, in order
}

// accept runs the handshake of the stream whose requests recv receives.
// On an error the stream is refused, with nothing of it left set up;
// otherwise the caller closes what it returns when the stream ends.
func (h handshake[Req, Open, Resp]) accept(recv func() (Req, error)) (_ *opened[Open, Resp], err error) {
	first, err := recv()
	if err != nil {
		return nil, err
	}
	var none Open
	open := h.opening(first)
	if open == none {
		return nil, status.Error(codes.InvalidArgument, h.missing)
	}
	o := &opened[Open, Resp]{open: open}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	undo, err := h.admit(first, open)
	o.keep(undo)
	if err != nil {
		return nil, err
	}
	o.out = newSender(h.send, h.log.With(zap.String("stream", h.name(open))))
	o.keep(o.out.close)
	welcome, undo, err := h.setUp(open, o.out)
	o.keep(undo)
	if err != nil {
		return nil, err
	}
	if err := o.out.push(welcome); err != nil {
		return nil, err
	}
	return o, nil
}

// keep adds undo (nil: nothing to undo) to what close undoes.
func (o *opened[Open, Resp]) keep(undo func()) {
	if undo != nil {
		o.undo = append(o.undo, undo)
	}
}

// close undoes what the handshake set up, the latest first: what setUp
// set up, the sender, what admit set up.
func (o *opened[Open, Resp]) close() {
	for i := len(o.undo) - 1; i >= 0; i-- {
		o.undo[i]()
	}
}

// serveRequests gives handle the requests that follow a stream's opening,
// each within the limits (check; violated ends the stream for a request
// that is not), until the stream ends: nil when the peer closed it, else
// the stream's error or handle's.
func serveRequests[Req any](recv func() (Req, error), check func(Req) error, violated func(error) error, handle func(Req) error) error {
	for {
		req, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := check(req); err != nil {
			return violated(err)
		}
		if err := handle(req); err != nil {
			return err
		}
	}
}
