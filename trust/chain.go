package trust

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Size is the size of a chain value: a SHA-256 digest.
const Size = sha256.Size

// Bounds of a chain's length.
const (
	MinLength = 64
	MaxLength = 1 << 24
)

// DefaultLength is a chain's default length: 65,536 tokens, made in about
// 15 ms and kept in about 16 KiB (checkpoints and one expanded segment).
const DefaultLength = 1 << 16

// ErrExhausted is returned by Chain.Next once every token was given.
var ErrExhausted = errors.New("trust: hash chain exhausted")

// Anchor is what a sender publishes about one of its chains: its id, its
// length N and H^N(seed).
type Anchor struct {
	ChainID uint64
	Length  uint32
	Value   [Size]byte
}

// Token is the k-th value of a chain: H^(N-k)(seed), for k in 1..N.
// Hashing it k times gives the anchor.
type Token struct {
	ChainID uint64
	Index   uint32
	Value   [Size]byte
}

func (t Token) String() string { return fmt.Sprintf("%d of chain %016x", t.Index, t.ChainID) }

// Stamp is what a message carries: its token and, while the sender
// re-anchors, the anchor of its next chain.
type Stamp struct {
	Token Token
	Next  *Anchor
}

// hash is the chain's step: H(x) = SHA-256(x).
func hash(v [Size]byte) [Size]byte { return sha256.Sum256(v[:]) }

// hashN hashes v n times.
func hashN(v [Size]byte, n uint32) [Size]byte {
	for range n {
		v = hash(v)
	}
	return v
}

// Chain gives one chain's tokens in order, 1 to N. Producing token k needs
// H^(N-k)(seed); rather than hashing N-k times per token it keeps the
// values H^(i·step)(seed) (checkpoints, step ≈ √N) and expands one
// segment of step values at a time, so a token costs one hash amortised
// and the chain O(√N) memory.
type Chain struct {
	id     uint64
	length uint32
	anchor [Size]byte
	next   uint32 // index of the next token to give; length+1 when exhausted

	step   uint32
	checks [][Size]byte // checks[i] = H^(i·step)(seed)
	seg    [][Size]byte // seg[t] = H^(segAt+t)(seed)
	segAt  uint32
	segOK  bool
}

// NewChain builds the chain id of the given length from seed.
func NewChain(id uint64, seed [Size]byte, length uint32) (*Chain, error) {
	if length < MinLength || length > MaxLength {
		return nil, fmt.Errorf("trust: a chain of %d tokens: want %d..%d", length, MinLength, MaxLength)
	}
	step := uint32(math.Sqrt(float64(length)))
	c := &Chain{id: id, length: length, next: 1, step: step}
	v := seed
	for j := uint32(0); ; j++ {
		if j%step == 0 {
			c.checks = append(c.checks, v)
		}
		if j == length {
			break
		}
		v = hash(v)
	}
	c.anchor = v
	return c, nil
}

// Anchor returns the chain's anchor.
func (c *Chain) Anchor() Anchor { return Anchor{ChainID: c.id, Length: c.length, Value: c.anchor} }

// Remaining returns how many tokens are left.
func (c *Chain) Remaining() uint32 { return c.length + 1 - c.next }

// Next returns the next token.
func (c *Chain) Next() (Token, error) {
	if c.next > c.length {
		return Token{}, ErrExhausted
	}
	k := c.next
	j := c.length - k // the token is H^j(seed)
	if !c.segOK || j < c.segAt || j >= c.segAt+uint32(len(c.seg)) {
		c.expand(j)
	}
	c.next++
	return Token{ChainID: c.id, Index: k, Value: c.seg[j-c.segAt]}, nil
}

// expand computes the segment of values around H^j(seed) from its
// checkpoint.
func (c *Chain) expand(j uint32) {
	i := j / c.step
	at := i * c.step
	n := min(c.step, c.length-at)
	if c.seg == nil {
		c.seg = make([][Size]byte, 0, c.step)
	}
	c.seg = c.seg[:0]
	v := c.checks[i]
	for t := uint32(0); t < n; t++ {
		c.seg = append(c.seg, v)
		v = hash(v)
	}
	c.segAt, c.segOK = at, true
}

// Options tune a Signer.
type Options struct {
	// Length of each chain. Default: DefaultLength.
	Length uint32
	// AnnounceBelow: once the current chain has fewer tokens left, the
	// next chain is made and announced in every stamp. Default: Length/8.
	AnnounceBelow uint32
	// SwitchBelow: once the current chain has fewer tokens left, stamps
	// use the next chain's tokens. Default: Length/16. Must be below
	// AnnounceBelow, so that the next chain is announced in stamps that
	// still carry tokens of the chain receivers trust.
	SwitchBelow uint32
}

func (o Options) withDefaults() (Options, error) {
	if o.Length == 0 {
		o.Length = DefaultLength
	}
	if o.Length < MinLength || o.Length > MaxLength {
		return o, fmt.Errorf("trust: chain length %d: want %d..%d", o.Length, MinLength, MaxLength)
	}
	if o.AnnounceBelow == 0 {
		o.AnnounceBelow = o.Length / 8
	}
	if o.SwitchBelow == 0 {
		o.SwitchBelow = o.Length / 16
	}
	if o.SwitchBelow < 1 || o.SwitchBelow >= o.AnnounceBelow || o.AnnounceBelow > o.Length {
		return o, fmt.Errorf("trust: switch below %d and announce below %d: want 1 <= switch < announce <= length %d",
			o.SwitchBelow, o.AnnounceBelow, o.Length)
	}
	return o, nil
}

// Signer is a node's identity over time: the chain it stamps its messages
// with, re-anchored before it runs out. While the current chain has fewer
// than AnnounceBelow tokens left, every stamp carries the next chain's
// anchor beside a token of the current one; below SwitchBelow the stamps
// use the next chain. A receiver that sees any stamp of that window learns
// the next chain through a message it can verify, so trust survives any
// uptime. A Signer is not safe for concurrent use.
type Signer struct {
	rand io.Reader
	opts Options
	cur  *Chain
	next *Chain // made and announced; nil outside the window
}

// NewSigner makes a Signer whose chains take their ids and seeds from
// rand (crypto/rand.Reader in production).
func NewSigner(rand io.Reader, opts Options) (*Signer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Signer{rand: rand, opts: o}
	if s.cur, err = s.newChain(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Signer) newChain() (*Chain, error) {
	var b [8 + Size]byte
	if _, err := io.ReadFull(s.rand, b[:]); err != nil {
		return nil, fmt.Errorf("trust: reading randomness for a chain: %w", err)
	}
	var seed [Size]byte
	copy(seed[:], b[8:])
	return NewChain(binary.BigEndian.Uint64(b[:8]), seed, s.opts.Length)
}

// Anchor returns the anchor of the chain the stamps use now: what the node
// publishes.
func (s *Signer) Anchor() Anchor { return s.cur.Anchor() }

// Next returns the next stamp.
func (s *Signer) Next() (Stamp, error) {
	if s.next == nil && s.cur.Remaining() < s.opts.AnnounceBelow {
		next, err := s.newChain()
		if err != nil {
			return Stamp{}, err
		}
		s.next = next
	}
	if s.next != nil && s.cur.Remaining() < s.opts.SwitchBelow {
		s.cur, s.next = s.next, nil
	}
	tok, err := s.cur.Next()
	if err != nil {
		return Stamp{}, err
	}
	st := Stamp{Token: tok}
	if s.next != nil {
		a := s.next.Anchor()
		st.Next = &a
	}
	return st, nil
}
