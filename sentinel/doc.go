// Package sentinel watches node behaviour (task acceptance versus completion,
// failure rates against capability peers, heartbeat replays and chain breaks,
// resource outliers) and proposes quarantines and releases, which the mesh
// commits through Raft.
//
// It never dispatches anything. Nothing is built here yet.
package sentinel
