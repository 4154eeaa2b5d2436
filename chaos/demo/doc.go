// Package demo holds the scripted chaos scenarios that `robonode demo` runs:
// a throwaway mesh of real nodes started in this process on loopback, a
// workflow submitted through the public gRPC API, nodes killed mid-run on
// cue, and the story of what the mesh does about it told as it happens.
//
//   - RunWagglers (the default demo): one server on the embedded SQLite
//     store and three worker-only nodes serving code.exec. Once the
//     workers run tasks it kills one (its missed heartbeats counted, its
//     attempts moving to live nodes without spending a retry), then the
//     node holding the Waggler role (a successor at a higher epoch adopts
//     what runs on live workers), then sums up where each task ran.
//   - RunMesh: three servers on one Postgres and two worker-only nodes;
//     once a task is done it kills the engine leader and names the next.
//
// Every demo mesh is secured as a real one would be: a CA and a
// certificate per node, an API token, an encrypted gossip key and an exec
// policy naming the one program the demo runs (security.go).
//
// Package chaos breaks a mesh of containers at random and judges the
// record afterwards; these scenarios break an in-process mesh at chosen
// moments and tell what happens. They share no code with it: the harness
// knows the mesh only through docker and the public API, while a scenario
// holds its nodes (node.Node) and reads their view of the mesh.
package demo
