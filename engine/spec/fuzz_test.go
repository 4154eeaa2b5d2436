package spec_test

import (
	"errors"
	"os"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/spec"
)

// FuzzCompile checks that no input makes Compile panic, that failures are
// always an ErrorList, and that a successful compile is deterministic and
// encodable. Seeds: every example and every invalid spec of the test table.
func FuzzCompile(f *testing.F) {
	for _, file := range exampleFiles(f) {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, tc := range invalidCases {
		f.Add([]byte(tc.src))
	}
	for _, src := range hashSameVariants {
		f.Add([]byte(src))
	}
	f.Add([]byte(fullSpec))

	f.Fuzz(func(t *testing.T, src []byte) {
		// Small limits keep each run fast; they are still far above what
		// the interesting shapes need.
		opts := spec.Options{Limits: spec.Limits{MaxNodes: 20_000}}
		wf, err := spec.Compile("fuzz.yaml", src, opts)
		if err != nil {
			var list spec.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty ErrorList: %T %v", err, err)
			}
			for _, e := range list {
				if e.Msg == "" {
					t.Fatalf("error without a message: %#v", e)
				}
			}
			return
		}
		if _, err := proto.Marshal(wf); err != nil {
			t.Fatalf("proto.Marshal: %v", err)
		}
		again, err := spec.Compile("fuzz.yaml", src, opts)
		if err != nil {
			t.Fatalf("second compile failed: %v", err)
		}
		if h1, h2 := spec.Hash(wf), spec.Hash(again); h1 != h2 || h1 == "" {
			t.Fatalf("hash differs between compiles: %s vs %s", h1, h2)
		}
	})
}
