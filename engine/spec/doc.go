// Package spec compiles workflow specs, written in YAML or JSON, into the
// workflow IR (robonetv1.Workflow) that the engine stores and runs.
//
// # Pipeline
//
// Compile runs five steps over one spec:
//
//  1. Parse. The source is checked against Limits.MaxSpecBytes and for valid
//     UTF-8, then parsed by yaml.v3 into a yaml.Node tree. JSON is read the
//     same way (it is YAML's flow style). Empty input and more than one YAML
//     document are errors. yaml.v3's syntax errors are reworded; for JSON
//     sources encoding/json supplies the exact line and column.
//  2. Walk with positions. We walk the node tree ourselves instead of
//     decoding into structs, so every value keeps its line and column. Aliases
//     are followed, and every node visited (through an alias as often as it is
//     used) is charged to Limits.MaxNodes, so "alias bombs" stop early instead
//     of expanding. Duplicate keys, merge keys (<<) and unknown keys are
//     reported here, unknown keys with a "did you mean".
//  3. Validate. Names, capabilities, actions, durations and numbers are
//     checked field by field. The needs graph is checked for unknown tasks,
//     self-needs and cycles (each cycle is named: "cycle: a -> b -> a").
//     Every ${{ expression }} is type-checked by package expr, then its
//     references are checked against its scope: tasks.X.output only for X
//     upstream of the task (its transitive needs; outputs may read any task),
//     inputs.Y only for declared inputs, item and index only in the with of a
//     spread task.
//  4. Fold defaults. Each task's on_failure, retry and timeout are combined
//     field by field with the workflow's defaults and the built-in ones, so
//     the IR of a task is complete on its own. A task that aborts gets a
//     single attempt.
//  5. Canonicalise. Inputs, tasks, outputs and map entries are sorted by name,
//     needs sorted and de-duplicated, expressions stored in the canonical
//     form package expr prints, and subtrees without expressions folded into
//     canonical JSON literals. Two specs that mean the same thing therefore
//     produce the same IR, and Hash gives them the same identity whatever
//     their key order, whitespace, comments or format.
//
// # Errors
//
// An invalid spec is rejected with an ErrorList holding every problem found
// (up to Limits.MaxErrors), sorted by position. Each Error says where the
// problem is (file, 1-based line and column, task, field path such as
// "with.url" or "needs[1]"), what is wrong and, when we can tell, how to fix
// it. Error() prints them in one line each:
//
//	flow.yaml:12:9: task "probe": needs[0]: unknown task "discovr"; did you mean "discover"?
//
// Columns inside expressions point at the problem within the expression when
// the scalar is written on one line without escapes; otherwise they point at
// the start of the value. Messages never expose Go or library internals, and
// Compile never panics, whatever the input (FuzzCompile checks this).
//
// Compile does not stop at the first problem: it goes on where the rest of
// the spec can still be checked meaningfully, so one run shows the user most
// of what needs fixing.
package spec
