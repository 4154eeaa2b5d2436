// Package robonet is the root of roboNet, a mesh of peer nodes that runs
// declarative workflows (DAGs of tasks) and never loses work when nodes die.
//
// The code lives in the sub-packages; docs/architecture.md describes how they
// fit together. This package holds only repository-wide tests, such as the
// architecture rules in arch_test.go.
package robonet
