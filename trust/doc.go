// Package trust implements HCTH, the hash-chain trust handshake, and the
// per-peer trust scores, tiers and dispatch allowance built on it.
//
// # Hash chains
//
// A node picks a secret seed and a chain length N and publishes the
// anchor H^N(seed) (H is SHA-256) in its gossip metadata; the leader also
// registers it through Raft. Its k-th stamped message carries the token
// H^(N-k)(seed) with k. A receiver keeps the last token it accepted (at
// first the anchor, index 0) and checks a later token k' by hashing it
// k'-k times: the result must be the kept token. So:
//
//   - gaps are cheap: a receiver that saw only some messages hashes the
//     difference (bounded by a maximum gap, DefaultMaxGap = 4,096); a
//     receiver that heard nothing while the sender stamped more for
//     others jumps forward the whole way (Jump: forward only, so all a
//     sender can make one verifier hash on a chain is the chain's length);
//   - a token at or before the last accepted one is a replay or a
//     reorder: ignored and counted, not a betrayal;
//   - forging a later token needs a pre-image of SHA-256; a token that
//     does not hash to the kept one is a betrayal (Forged), and the
//     verifier stays broken until reset;
//   - tokens of a chain the receiver has no anchor of are not judged
//     (the sender restarted): the receiver fetches its published anchor.
//
// A Chain makes tokens in O(1) hashes each, amortised, from √N
// checkpoints. A Signer re-anchors before its chain runs out: below N/8
// tokens left it makes the next chain and announces its anchor in every
// stamp, beside a token of the current chain; below N/16 it switches. A
// receiver that sees any stamp of that window learns the next chain
// through a message it can verify, so trust survives any uptime; one that
// saw none meets an unknown chain and reads the published anchor.
//
// # Reputation
//
// Each observer keeps a Book of its peers. Evidence (heartbeats verified,
// attempts completed, attempts lost by the peer's fault, replays,
// verification votes, limit violations) adds to a good or a bad mass,
// each kind with its weight; both masses halve every HalfLife, so old
// evidence is forgotten. The score is the beta-reputation
// (1 + good) / (2 + good + bad): 0.5 with no evidence. A broken chain is a
// betrayal: score 0 and the lowest tier at once, until Reset (a quarantine
// ended: the peer starts again from zero).
//
// Tiers are unverified < provisional < established < trusted. A peer
// enters a tier when its score and its good mass both reach the tier's
// minimums, and leaves it downwards only when its score falls below the
// minimum minus ScoreMargin or its good mass below EvidenceMargin of the
// minimum (hysteresis: one failure does not flap a peer). DefaultParams
// gives every number. The observer itself, and peers an operator
// pre-trusts, count as trusted (until they betray).
//
// Dispatch asks a tier (established by default). Allowance gives a peer at
// that tier all its slots, a betrayed one none, and one below it one
// attempt at a time plus one per ProbationStep of good evidence: a new
// node earns its way up by completing work, and a stranger never runs
// everything at once.
//
// The package is pure: no I/O, clocks or goroutines. Randomness comes in
// as an io.Reader, time as arguments; callers serialise access.
package trust
