// Package robonetv1 holds the generated Go code of roboNet's protobuf
// definitions: the workflow IR (workflow.proto) and the client gRPC API,
// WorkflowService (api.proto). The .proto files beside this file are the
// source of truth; regenerate with `make generate` and commit the result
// (`make verify-generate` fails when generated code is stale).
package robonetv1
