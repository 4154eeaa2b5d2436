// Package node is the composition root of a robonode: it builds the
// services of one node from a Config, wires them together, serves the
// gRPC and HTTP APIs, and owns their lifecycle. It holds no domain rules:
// workflows are the engine's business, workers wag's, and this package only
// connects them.
//
// # What a node is made of (single server)
//
//	           gRPC WorkflowService (+ health, reflection)      HTTP /healthz /readyz
//	                         │
//	                         ▼
//	  Store ◀──────── engine.Engine ──Dispatcher──▶ wag.Local ──▶ worker pools
//	(SQLite in         (runloop, leases,  ◀──ResultSink──   (per capability,
//	 DataDir, or        group commit)                        built-in actions)
//	 Postgres)
//
// The engine is wag's ResultSink and wag is the engine's Dispatcher: each
// needs the other at construction, so a small relay is handed to wag and
// pointed at the engine before anything starts. Across a mesh (next issue)
// the same two interfaces are served over gRPC streams; nothing in the
// engine or in wag changes.
//
// # Lifecycle
//
// New validates the Config and does no I/O. Start, in dependency order:
// locks the data directory (one node per directory), increments the fencing
// term, opens the store, builds and starts wag and the engine, then the
// gRPC and HTTP servers; if a step fails, what already started is stopped.
// Stop goes in reverse: readiness off and health NOT_SERVING, watch streams
// ended (clients resume elsewhere), gRPC and HTTP servers stopped, the
// engine stopped (it releases its leases, so the next owner claims them at
// once), the workers stopped (running actions cancelled, exec children
// killed), the store closed, the directory unlocked. Every error is
// returned, joined; Stop is idempotent.
//
// # The fencing term on one node
//
// The engine fences its writes with a term: a claim under a newer term
// takes over leases held under an older one at once. In a mesh the term is
// the Raft term. On a single node it is a counter in DataDir/term,
// incremented at every start and replaced atomically, so a node restarted
// after kill -9 takes its own previous leases over without waiting for
// them to expire.
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
