// Package trust implements HCTH, the hash-chain trust handshake: a node
// publishes the anchor H^N(seed) and reveals one pre-image per message, so
// receivers can verify gaps cheaply and detect replays and forgeries. On top
// of the chains it keeps per-peer trust scores, tiers and dispatch
// eligibility.
//
// The core is pure: no I/O, clocks or goroutines. It is built in the trust
// issue.
package trust
