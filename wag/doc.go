// Package wag implements Wagglers and workers: per capability, a
// Waggler dispatches attempts to workers, watches their sequenced heartbeats
// and reassigns an attempt when its worker dies; worker pools run actions —
// the built-ins exec, http, sleep and echo, and Go handlers registered by
// programs that embed a node — each attempt in isolation.
//
// # Shape
//
// Three parts, one per role a node can have:
//
//   - WorkerHost runs the node's worker pools, one per capability it serves
//     (--capability NAME=SIZE). A pool is not welded to a Waggler: it works
//     for whichever Waggler its capability has now (Attach), on this node
//     or another, registering its slots with what they run.
//
//   - WagglerHost runs the Waggler roles the leader gives this node, one
//     Waggler per capability at the epoch of its assignment. The leader
//     reaches it through a Session of its term (SetRoles, Dispatch,
//     Cancel); what the Wagglers report goes to the newest session's
//     Uplink, results numbered and kept until acknowledged.
//
//   - Router is the engine's Dispatcher on the leader, for one term: it
//     routes each attempt to the Waggler of its capability (Directory:
//     the Raft control state in a mesh), hands attempts over again when a
//     Waggler moves (with the worker each runs on, so the successor adopts
//     instead of running again, or, with no worker known, marked as one
//     that may run, which the successor holds back until the workers of
//     its capability have registered), and keeps attempts of a capability
//     no node serves, visibly waiting. Its decisions are a pure core
//     (routeCore: events in, effects out, no clock, lock or socket inside);
//     the Router applies the effects after unlocking.
//
//   - RoleFollower is the roles' one home on every node: it resolves who
//     holds each capability's role (Holders), advertises the roles the
//     node's WagglerHost runs, and attaches the node's pools to the
//     Waggler of their capability. It sees the mesh through the
//     RoleSource port, which package node adapts (roles.go).
//
//     engine ──Dispatch/Cancel──▶ Router ──Session (in-process or Lead stream)──▶ WagglerHost ──▶ Waggler(capability)
//     Waggler ──Worker.Run/Cancel (in-process or Work stream)──▶ pool slot
//     pool slot ──Heartbeats/Report──▶ Waggler ──results, progress, starts──▶ Router ──▶ engine
//
// The Waggler never calls a goroutine directly: it sees its workers
// through the Worker interface (Run, Cancel) and hears from them through
// Heartbeat(s) and Report; a pool sees its Waggler as a Target. Across
// nodes the same messages travel on gRPC streams (package wag/remote), so
// none of these types knows whether a peer is in the same process.
//
// Durable state never lives here. A Waggler holds only routing state (a
// queue, who runs what, the heartbeat ladder); the engine owns attempts and
// re-dispatches whatever a lost Waggler held. Dispatch is at-least-once: the
// same attempt may run twice (a failover, a node restart), so handlers get
// an idempotency key (Call.IdempotencyKey: execution id + attempt) and the
// engine records each attempt's completion once.
//
// # Dispatch, queues and backpressure
//
// The Router accepts every attempt of its term and never waits for
// execution. A Waggler answers each handoff: accepted, ErrBusy when its
// capability already has QueueSize attempts waiting (the Router keeps the
// attempt and hands it over again with backoff: that is the backpressure),
// or ErrNotWaggler when the node no longer holds the role at that epoch
// (the Router routes it again when the roles change). An attempt a
// Waggler already holds is ignored, which makes a re-sent handoff
// harmless. Attempts of a capability no node serves wait in the Router,
// each reported once through TaskProgress with "waiting: no node serves
// X"; attempts a Waggler holds with no live worker are reported "waiting:
// no worker offers capability X".
//
// # Workers and isolation
//
// A pool has a fixed number of worker goroutines; idle ones wait for an
// assignment, so there is no goroutine per task (the built-in exec and http
// actions use the few I/O goroutines os/exec and net/http need). Each
// attempt runs with its own context, cancelled by Cancel, by the attempt's
// Timeout and by Stop. A panic in a handler is recovered and fails the
// attempt with the panic message and a short stack (panics in goroutines a
// handler starts itself cannot be contained). An output that is not a
// JSON-like value, or whose JSON encoding exceeds MaxOutputBytes, fails the
// attempt with a message saying so.
//
// A handler that ignores cancellation is abandoned CancelGrace after its
// context was cancelled: its slot gets a fresh goroutine at once and the
// attempt fails with "… it was abandoned", while the old goroutine goes on
// until the handler returns, if it ever does, and its result is discarded.
// The trade-off: a slot is never lost to a hung action, but the hung
// goroutine (and whatever it holds) lives on outside the pool bound, so a
// node whose actions keep hanging grows; such handlers are bugs, and the
// log names them. Stop waits for abandoned goroutines too, until its
// context ends, and then returns an error naming the attempts still running.
//
// # Trust: nodes and worker programs
//
// With Config.Trust set, a Waggler asks it how many attempts each worker's
// trust subject may run at once (Allowance), ranks the free workers by it
// (Rank, the most trusted first), skips the quarantined ones, and tells it
// what the workers do (attempts accepted, completed, lost; heartbeat
// replays; misbehaviour). A subject is a worker's node, or — for the slots
// of a worker program's pool, node/capability/program-N — the program,
// named node/program (WorkerSubject; a pool named token~name, as a node
// names a program connected with a worker token, is judged as
// node/token): a program starts on probation
// whatever its node's trust, is bounded by its node's allowance as well as
// its own, and what it loses or misdoes counts against it, not its node (a
// completion counts for both). What is about the machine stays the node's:
// verified runs on distinct nodes, node deaths, locality. The node a
// program connects through reports what only it sees the program do
// wrong (Misbehaviour) through the pool's Target.
//
// # Heartbeats and the ladder
//
// Every HeartbeatInterval, a pool sends one heartbeat per running attempt
// to its Waggler: attempt key, Waggler generation, worker id, a sequence
// number (1, 2, 3, … per assignment) and progress (across nodes the batch
// travels with the pool node's HCTH stamp: wag/remote, package trust): the latest Call.Progress report (steps done/total,
// ETA, message) and, for exec, the CPU share and resident memory of the
// process from /proc/<pid>/stat (zero elsewhere). Heartbeats say the worker
// is alive, so they continue while a timed-out action winds down. Each
// accepted heartbeat is forwarded to the sink as TaskProgress.
//
// The Waggler judges heartbeats with a pure state machine (monitor.go: no
// goroutines or clocks, time is an argument) and ticks it every half
// interval. An attempt has missed k heartbeats when its silence, less a
// slack of a quarter interval, spans k whole intervals. The ladder:
//
//	1 missed               → logged (Info)
//	2 missed               → alert (Warn); a free worker is reserved as backup
//	MissedHeartbeats (3)   → worker dead → FAILOVER: the same attempt (same
//	                         AttemptKey, same input) under a new generation, to
//	                         the backup, else to the head of the queue
//
// A heartbeat with a sequence number not above the last accepted one is a
// replay or reorder: ignored and counted (WagglerStatus.ReplaysIgnored). A
// gap (5 after 3) counts the skipped numbers as missed heartbeats (logged),
// but the heartbeat itself is a sign of life, so a gap never kills. A
// heartbeat or report about an older generation, or from a worker that no
// longer holds the attempt, is stale and discarded: that is how a late
// result from a dead worker is kept from the engine. (*Waggler).WorkerDead
// short-cuts the ladder for a memberlist dead event. A worker declared dead
// is given no work; it comes back when it reports (its slot is then free)
// or is added again with AddWorker. Attempt numbers stay the engine's: a
// failover is not a new attempt, so a task's retry budget is not spent on
// a worker's death.
//
// # Waggler states
//
//	IDLE ──▶ DISPATCHING ──▶ MONITORING ──▶ COLLECTING ──▶ IDLE
//	            ▲   ▲            │    ▲           │
//	            │   │            ▼    └───────────┤ (others still running)
//	            │   └─────── FAILOVER             │
//	            └─────────────────────────────────┘ (more queued)
//
// A Waggler coordinates many attempts at once, so its state is that of its
// latest step: DISPATCHING while attempts wait for a worker or are being
// handed to one, MONITORING while attempts run and none waits, COLLECTING
// while a result is being taken in, FAILOVER while a dead worker's attempt
// is being reassigned, IDLE when nothing is queued or running. After each
// step it settles on DISPATCHING (something queued), MONITORING (something
// running) or IDLE. Besides the edges drawn (the design's, plus those that
// come from running many attempts at once) there are MONITORING →
// DISPATCHING (new work arrives while attempts run), MONITORING → IDLE
// and DISPATCHING → IDLE (the last attempt is cancelled), and DISPATCHING →
// COLLECTING and → FAILOVER (a result or a death while others wait).
// Local.Wagglers returns a WagglerStatus per capability.
//
// # Results, cancellation and stop
//
// Exactly one TaskResult is sent per assignment (attempt and generation)
// that finished and is still current: OK with the normalized output, or !OK
// with the error, with WorkerID, StartedAt and FinishedAt. A cancelled
// attempt reports nothing: the engine already forgot it, and silence keeps
// a late "cancelled" failure from looking like a real one. Stop drops what
// is queued and cancels what runs without reporting either, for the same
// reason: the engine re-dispatches them after a restart.
//
// # Built-in actions
//
// exec runs a program: {argv: [..] (required), env: {K: V}, stdin: string
// or any value (sent as JSON), dir, timeout: "30s"}. The node's ExecPolicy
// (Config.Exec: --exec-allow, --exec-user) decides first whether the
// program may run: it is matched by its absolute path (a bare name as the
// node's PATH resolves it), and a refusal fails the attempt with an error
// wrapping ErrExecRefused that names the program and the node. The
// process gets only PATH, HOME, LANG and TZ from the node's environment
// (execInherited; with --exec-user, that user's HOME, USER and LOGNAME),
// then env, then ROBONET_ATTEMPT, ROBONET_EXECUTION_ID,
// ROBONET_INSTANCE_ID, ROBONET_TASK, ROBONET_IDEMPOTENCY_KEY,
// ROBONET_WORKER (node/capability/slot) and ROBONET_EXEC_TOKEN, a random
// value per attempt (env cannot override them). Stdout that parses as
// JSON is the output, otherwise its trimmed text; stdout beyond
// MaxOutputBytes fails the attempt. A non-zero exit fails with the exit
// code and the last 2 KiB of stderr.
//
// What an exec attempt starts ends with it ("Process containment" in
// docs/workflows.md says what is and is not contained). The process runs in
// a process group of its own: on cancellation the group gets SIGTERM and,
// 2s later, SIGKILL; when the program exits, whatever it left running in
// its group is killed. On Linux, descendants that left the group (setsid, a
// double fork) are killed next (contain_linux.go): with cgroup.kill when
// the node's cgroup v2 cgroup is delegated to it and the attempt ran in a
// sub-cgroup of it, otherwise by a scan of /proc for processes whose
// environment holds the attempt's ROBONET_EXEC_TOKEN. A descendant that
// both leaves the group and drops the token escapes the scan; containers
// are the tool for hard isolation and resource limits.
//
// http makes a request with a client shared by the node: {method (GET),
// url (http or https, required), headers: {K: V}, body: string or any value
// (sent as JSON with Content-Type application/json), timeout: "10s"
// (default 5m), expect_status: [int] (default 200-299)}. The output is {status, headers
// (lowercased names, repeated values joined with ", "), body}, the body
// JSON-decoded when the Content-Type is JSON (application/json or +json; a
// body that claims JSON but is not fails) and text otherwise (non-UTF-8
// bodies fail). Reading stops past MaxOutputBytes. An unexpected status
// fails with the status and the start of the body. A request carries an
// Idempotency-Key header (the attempt's) unless headers set one.
//
// sleep waits {duration: "2s"}, reporting progress in ten steps with an
// ETA, honouring cancellation; its output is {slept: "2s"}. echo returns
// its input unchanged.
package wag
