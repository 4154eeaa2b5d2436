// Package port holds the engine's ports: the types the engine shares with
// what it is plugged into, apart from the runloop that uses them.
//
//   - The Store (store.go): the durable state of workflows and instances,
//     with its records, requests and errors; adapters in engine/store/*
//     implement it, and one conformance suite (engine/store/storetest)
//     checks them all.
//   - The Dispatcher and ResultSink (ports.go): how attempts leave the
//     engine (TaskDispatch) and how their outcomes come back (TaskResult,
//     TaskProgress), named by AttemptKey; package wag implements them.
//   - Admission, InstanceState, schedules' records, the partition of an
//     instance id (PartitionOf, NewIDIn, ChildID) and StorableText: what
//     both sides must agree on.
//
// It imports nothing of the module: adapters and wag depend on it without
// depending on the runloop (arch_test.go keeps it so).
package port
