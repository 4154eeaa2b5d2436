// Package chaos tests a real mesh of containers (the repository's
// docker-compose.yml) the way a data centre breaks one, Jepsen-style:
//
//   - a workload submits a mix of workflows through the public API (chains,
//     wide spreads, retries, sleeps that report progress), each with an
//     idempotency key and an output the harness knows in advance;
//   - a nemesis injects faults on a schedule — SIGKILL of a worker, of the
//     engine leader, of a capability's Waggler; docker pause past the
//     heartbeat deadline; a node, the leader or a minority cut off the
//     network; a Postgres restart; several at once — and heals each;
//   - a checker, once everything is healed and drained, proves that every
//     acknowledged submission finished with its expected output and that
//     the engine recorded every attempt at most once and every execution's
//     success exactly once (read from Postgres, not from the API alone),
//     and measures the recovery after each fault.
//
// The report is JSON, Markdown and an SVG timeline of faults against
// completions per second. cmd/robochaos runs it; `make chaos` (30 minutes)
// and `make chaos-smoke` (every fault once, under 10 minutes) build the
// images first.
package chaos
