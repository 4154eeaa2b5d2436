package wag

import "strings"

// ParseWorkerID splits a worker id, node/capability/slot (a pool's slot
// is "node/capability/N"; an external worker program's,
// "node/capability/name-N"), into its parts. Node names and capabilities
// hold no slash, so the id splits at its first two: the slot is all that
// follows the second. An id with fewer slashes is not a worker's: node is
// what precedes the first slash (the whole id without one), and what is
// missing is empty.
func ParseWorkerID(id string) (node, capability, slot string) {
	node, rest, _ := strings.Cut(id, "/")
	capability, slot, _ = strings.Cut(rest, "/")
	return node, capability, slot
}

// WorkerNode is the node part of a worker id (see ParseWorkerID).
func WorkerNode(id string) string {
	node, _, _ := ParseWorkerID(id)
	return node
}
