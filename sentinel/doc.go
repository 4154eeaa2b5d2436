// Package sentinel watches how nodes behave and decides quarantines and
// releases; the engine leader commits them through Raft and the Wagglers
// act on them. It never dispatches anything and does no I/O: observers
// feed it what they see, with the time.
//
// # Detectors
//
// Each observer (the leader, and every Waggler node for the workers it
// dispatches to) runs a Sentinel. Per node it keeps a sliding window
// (DefaultParams: 10 minutes in 10 time buckets, so memory per node is
// fixed, for at most 10,000 nodes) of what it saw, and six detectors each
// give a sub-score in [0, 1] with a reason that carries the numbers:
//
//   - lost attempts: the share of accepted attempts never completed, from
//     10 accepted on; 10 % scores 0, 50 % scores 1;
//   - failures against peers: per capability, each node's failure rate
//     against the other nodes serving it (at least 3 with 10 outcomes
//     each), by a robust z-score (rate − median) / (1.4826 · MAD), MAD at
//     least 0.01; z ≥ 3.5 with a rate of 20 % or more scores 0.5 (z 3.5)
//     to 1 (z 7);
//   - the hash chain: a forged token scores 1 at once; replays beyond 5
//     score up to 1 at 10;
//   - resources: a mean CPU or memory from heartbeats 5 robust deviations
//     above the other nodes' scores 0.5;
//   - verification: outvoted on one verified attempt scores 0.6, on two
//     or more 1;
//   - violations: each message beyond the stream limits scores a third.
//
// The anomaly score combines them as 1 − Π(1 − weight · sub-score), with
// weights 1 (resources 0.4, replays 0.8, violations 0.9), so one strong
// signal decides and weak ones add up; a node at 0.8 or above is
// anomalous and its observer proposes a quarantine. Resource use alone
// never reaches the threshold (a busy node is not a bad one), nor does one
// verification mismatch (a task may be less deterministic than its author
// thought). An observer never judges itself.
//
// # Quarantine and release
//
// A Ballot collects the observers' proposals (each observer's latest per
// node, live for the window) and decides: a node is quarantined once
// min(2, observers) distinct observers propose it — so one suffices in a
// mesh too small for more — and at once on one proposal naming proof
// rather than statistics: a broken hash chain, or outvoted on two or more
// verified attempts (each decided by a majority of other, distinct nodes:
// those are the confirmations). Never more than half
// the nodes are quarantined at once (the most anomalous first), so a bug
// or a liar cannot empty the mesh. A quarantine the Sentinel made is
// released after a 30-minute cool-down, and the node's trust starts again
// from zero; an operator's quarantine lasts until an operator releases it.
package sentinel
