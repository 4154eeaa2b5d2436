// Package examples embeds the example workflows that commands run without
// needing the repository checked out (robonode demo).
package examples

import _ "embed"

// Demo is examples/demo.yaml, the workflow `robonode demo` submits.
//
//go:embed demo.yaml
var Demo []byte

// DemoFile is the name Demo is submitted under, for error messages.
const DemoFile = "examples/demo.yaml"
