// Package engine runs workflows. Its sub-packages hold the pure pieces — the
// spec compiler (spec), expressions (expr), values (value) and the execution
// graph (graph) — and the storage adapters (store/...). This package declares
// the ports the engine consumes, starting with Store, and (from the
// single-node issue on) the leader runloop that ties graph and store together.
//
// The engine never imports the mesh, the Waggler layer or gRPC: it learns
// about leadership and dispatch through interfaces declared here and wired by
// package node.
package engine
