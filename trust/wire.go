package trust

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// AnchorBytes is the size of an encoded anchor: chain id, length, value.
const AnchorBytes = 8 + 4 + Size

// Encode returns a's fixed-size encoding (what a node advertises in its
// gossip metadata).
func (a Anchor) Encode() []byte {
	b := make([]byte, AnchorBytes)
	binary.BigEndian.PutUint64(b[:8], a.ChainID)
	binary.BigEndian.PutUint32(b[8:12], a.Length)
	copy(b[12:], a.Value[:])
	return b
}

// DecodeAnchor reads an encoded anchor.
func DecodeAnchor(b []byte) (Anchor, error) {
	if len(b) != AnchorBytes {
		return Anchor{}, fmt.Errorf("trust: an anchor is %d bytes, not %d", AnchorBytes, len(b))
	}
	a := Anchor{ChainID: binary.BigEndian.Uint64(b[:8]), Length: binary.BigEndian.Uint32(b[8:12])}
	copy(a.Value[:], b[12:])
	if a.Length < MinLength || a.Length > MaxLength {
		return Anchor{}, fmt.Errorf("trust: an anchor of a chain of %d tokens: want %d..%d", a.Length, MinLength, MaxLength)
	}
	return a, nil
}

// StampWire is a stamp's fields as they travel: the token's chain id,
// index and value, and the next chain's encoded anchor (empty when none).
type StampWire struct {
	ChainID uint64
	Index   uint32
	Value   []byte
	Next    []byte
}

// Wire returns s as it travels.
func (s Stamp) Wire() StampWire {
	w := StampWire{ChainID: s.Token.ChainID, Index: s.Token.Index, Value: s.Token.Value[:]}
	if s.Next != nil {
		w.Next = s.Next.Encode()
	}
	return w
}

// ErrNoStamp is returned by StampFromWire for a message that carries no
// stamp.
var ErrNoStamp = errors.New("trust: no stamp")

// StampFromWire reads a stamp as it travels.
func StampFromWire(w StampWire) (Stamp, error) {
	if w.ChainID == 0 && w.Index == 0 && len(w.Value) == 0 {
		return Stamp{}, ErrNoStamp
	}
	if len(w.Value) != Size {
		return Stamp{}, fmt.Errorf("trust: a token is %d bytes, not %d", Size, len(w.Value))
	}
	s := Stamp{Token: Token{ChainID: w.ChainID, Index: w.Index}}
	copy(s.Token.Value[:], w.Value)
	if len(w.Next) > 0 {
		a, err := DecodeAnchor(w.Next)
		if err != nil {
			return Stamp{}, fmt.Errorf("trust: the next anchor: %w", err)
		}
		s.Next = &a
	}
	return s, nil
}
