// Package node is the composition root of a robonode: it builds the
// services of one node from a Config, wires them together, serves the
// gRPC and HTTP APIs, and owns their lifecycle. It holds no domain rules:
// workflows are the engine's business, workers wag's, and this package only
// connects them.
//
// # What a node is made of
//
//	     gRPC WorkflowService ──forwarder──▶ the engine of this term (leader)
//	     gRPC MeshService                     │ or the store reader (follower reads)
//	     HTTP /healthz /readyz                │ or forwarded to the leader's gRPC
//	                                          ▼
//	mesh (memberlist + Raft) ──Leadership──▶ leader loop ──New/Start/Abandon──▶ engine.Engine
//	                                                                             │  ▲
//	  Store ◀──────────────── (Postgres for a mesh, SQLite for one server) ──────┘  │
//	  wag.Local (worker pools per capability) ◀──Dispatcher── engine ──ResultSink───┘
//
// The engine is wag's ResultSink and wag is the engine's Dispatcher. wag
// is built once; the engine changes with every leadership term, so wag
// reports to a relay that points at the engine of the current term (and
// drops results while this node follows: the instance's next owner
// re-dispatches the attempt).
//
// # Roles
//
// A server (the default without Join) runs Raft, opens the store and may
// lead; its engine.Query (the engine's read side, which needs no term)
// answers reads from the store while it follows, and is shared by the
// engine of every term it leads. A worker-only node (the default with Join) opens no store,
// runs no engine, advertises its capabilities in gossip and forwards every
// API call to the leader; remote dispatch to it comes with remote
// Wagglers. More than one server requires Postgres (ErrMeshNeedsPostgres):
// the embedded SQLite store lives on one node and could not follow the
// leadership to another.
//
// # The engine follows leadership (leader.go)
//
// One goroutine consumes the mesh's Leadership subscription, which always
// ends on the latest value, so the loop acts on states rather than edges
// and a coalesced signal cannot leave two runloops. Stepping down comes
// first and is immediate: the engine of the old term is Abandoned (nothing
// written, cancelled or released: a newer term may own its instances
// already). Stepping up waits for a Raft Barrier, checks the term is still
// ours, then starts a new Engine whose fencing token is the Raft term; the
// store lets a claim under a newer term take over older leases at once and
// refuses the older term's writes from then on. Raft's own leader lease
// (LeaderLeaseTimeout) makes a partitioned leader step down on its own.
//
// # Any node answers (forward.go)
//
// The forwarder serves the WorkflowService on every node. Calls that need
// the leader (register, submit, cancel; get and watch of a running
// instance) run on the local engine when this node leads, and are
// otherwise forwarded to the leader's gRPC address (from gossip) over a
// cached connection, marked with a header so that they make one hop at
// most: a node that receives a forwarded call and does not lead answers a
// typed mesh.NotLeaderError (UNAVAILABLE, ErrorInfo NOT_LEADER with the leader
// it knows). While no leader is known, and when a forwarded call fails with
// UNAVAILABLE, the forwarder retries with backoff up to ForwardTimeout (10 s),
// then answers UNAVAILABLE (ErrNoLeader). A forwarded submission without
// an idempotency key gets one, so a retry after a leader died mid-call
// cannot start the workflow twice. A watch forwarded through a follower
// resumes after its last event with the next leader. Finished instances
// and lists are read from the store by any server.
//
// # Lifecycle
//
// New validates the Config and does no I/O. Start, in dependency order:
// locks the data directory (one node per directory), opens the store
// (servers), builds wag and the store reader, opens the gRPC listener (its
// address goes into the gossip metadata), starts the workers and the mesh
// (joining with retries), serves gRPC and HTTP and starts the leader loop;
// if a step fails, what already started is stopped. Stop goes in reverse:
// readiness off and health NOT_SERVING, watch streams ended (clients
// resume elsewhere), gRPC and HTTP servers stopped, the leader loop
// stopped, the engine stopped gracefully if this node still leads (leases
// released), the mesh left (a leader hands leadership over first), the
// workers stopped (running actions cancelled, exec children killed), the
// store closed, the directory unlocked. Every error is returned, joined;
// Stop is idempotent. Halt is Stop as a crash would do it, for tests and
// fault drills: no leave, no leadership transfer, no lease released.
//
// # The fencing term
//
// The engine fences its writes with the Raft term of the leadership it
// runs under. A single node is a mesh of one: its Raft term lives in the
// Raft stable store in DataDir/mesh/raft and grows at every election, so a
// node restarted after kill -9 takes its previous leases over at once.
// (The per-start counter file DataDir/term of earlier versions is no longer
// used.) A single server's Raft timeouts are shortened to 250 ms so that
// it elects itself within about half a second.
//
// # The API edge
//
// api.go translates protobuf to engine types and back; values travel as
// canonical JSON text. Handlers return engine errors unchanged and one
// interceptor maps them to status codes (errors.go): spec errors to
// INVALID_ARGUMENT with a SpecErrors detail (file, line, column, task per
// problem), bad inputs to INVALID_ARGUMENT with google.rpc.BadRequest,
// unknown workflows or instances to NOT_FOUND, version conflicts to
// ALREADY_EXISTS, cancelling a finished instance to FAILED_PRECONDITION,
// and anything unexpected to INTERNAL with a generic message while the
// cause goes to the log. The gRPC API declares the Engine interface it
// consumes; *engine.Engine implements it.
package node
