package trust

import "strings"

// Subjects. Trust is kept per subject: a node (its name, which never
// holds a '/'), or a worker program connected to a node through the
// WorkerService, named NODE/PROGRAM. PROGRAM is the name of the program's
// worker token when it has one — the credential is its identity, so the
// programs of one token on a node are one subject, and a new name earns
// nothing afresh — and the name the program gives otherwise (an admin's,
// or on a node without tokens). A program is judged apart from the node
// it connects through: it starts on probation like a new node, what it
// loses or gets outvoted on counts against it alone, and it is
// quarantined on its own. The node still bounds it: a program never runs
// more at once than its node may (see wag's placement).

// ProgramSubject is the subject of the program called program on node.
func ProgramSubject(node, program string) string { return node + "/" + program }

// SplitSubject returns the node of a subject and, for a program, its
// name ("" for a node).
func SplitSubject(subject string) (node, program string) {
	node, program, _ = strings.Cut(subject, "/")
	return node, program
}

// IsProgram reports whether subject names a worker program.
func IsProgram(subject string) bool { return strings.Contains(subject, "/") }

// Pre-trust patterns beyond a subject's exact name (Book.PreTrust).
const (
	// AllPeers pre-trusts every node, not the programs connected to them.
	AllPeers = "*"
	// AllPrograms pre-trusts every worker program of every node.
	AllPrograms = "*/*"
)

// ProgramsOf is the pattern that pre-trusts every program of node.
func ProgramsOf(node string) string { return node + "/*" }
