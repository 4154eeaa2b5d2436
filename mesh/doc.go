// Package mesh owns membership and agreement: hashicorp/memberlist gossip with
// node metadata (roles, capabilities, addresses, trust anchor), the Raft group
// of server nodes and the small replicated control state (waggler assignments
// with epochs, the quarantine list, cluster settings).
//
// It knows nothing about workflows. It is built in the mesh issue.
package mesh
