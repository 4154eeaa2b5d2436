package spec_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/robonet/robonet/engine/expr"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exprLimits returns expression limits with the given maximum source length.
func exprLimits(maxSourceLen int) expr.Limits {
	return expr.Limits{MaxSourceLen: maxSourceLen}
}
