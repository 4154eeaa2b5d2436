package trust

import (
	"testing"
)

// FuzzVerify: whatever stamp arrives off the wire, verifying it never
// panics, and it is accepted only if its token is the genuine token of
// its index on the sender's chain.
func FuzzVerify(f *testing.F) {
	s, err := NewSigner(seeded("fuzz"), Options{Length: 256})
	if err != nil {
		f.Fatal(err)
	}
	anchor := s.Anchor()
	var honest []Stamp
	for range 256 - 256/16 { // the whole first chain, up to the switch
		st, err := s.Next()
		if err != nil {
			f.Fatal(err)
		}
		honest = append(honest, st)
	}
	genuine := map[uint32][Size]byte{}
	for _, st := range honest {
		if st.Token.ChainID == anchor.ChainID {
			genuine[st.Token.Index] = st.Token.Value
		}
	}
	for _, st := range honest[10:14] {
		w := st.Wire()
		f.Add(w.ChainID, w.Index, w.Value, w.Next)
	}
	f.Add(anchor.ChainID, uint32(12), make([]byte, Size), []byte(nil))
	f.Add(anchor.ChainID+1, uint32(1), make([]byte, Size), anchor.Encode())
	f.Fuzz(func(t *testing.T, chainID uint64, index uint32, value, next []byte) {
		st, err := StampFromWire(StampWire{ChainID: chainID, Index: index, Value: value, Next: next})
		if err != nil {
			return
		}
		v := NewVerifier(anchor, 0)
		for _, h := range honest[:10] {
			if v.Verify(h) != Accepted {
				t.Fatal("an honest stamp was refused")
			}
		}
		if v.Verify(st) == Accepted && (st.Token.ChainID != anchor.ChainID || genuine[st.Token.Index] != st.Token.Value) {
			t.Fatalf("accepted a token that is not genuine: chain %d index %d", st.Token.ChainID, st.Token.Index)
		}
	})
}
