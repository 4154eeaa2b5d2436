// Package node is the composition root of a robonode agent: it builds and
// wires the mesh, the Raft group, the engine, the Waggler role, trust,
// Sentinel and the gRPC and HTTP servers, and owns their lifecycle.
//
// It holds no domain rules. It is built in the single-node issue; until then
// the engine packages are exercised directly by their tests and by roboctl
// validate.
package node
