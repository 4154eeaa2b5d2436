package node

import (
	"slices"

	"go.uber.org/zap"

	"github.com/robonet/robonet/wag"
)

// execPolicy is the exec policy of the node's workers: ExecAllow and
// ExecUser as given, a policy required when the node listens beyond
// loopback (an empty ExecAllow then refuses every program).
func (c Config) execPolicy() wag.ExecPolicy {
	return wag.ExecPolicy{Allow: c.ExecAllow, Required: len(c.exposed()) > 0, User: c.ExecUser}
}

// logExecPolicy says at start what exec may run here, and warns when a
// node others can reach runs any program.
func (n *Node) logExecPolicy(p wag.ExecPolicy) {
	fields := []zap.Field{zap.Strings("exec_allow", p.Allow), zap.String("exec_user", p.User)}
	exposed := n.cfg.exposed()
	switch {
	case !p.Required:
		n.log.Debug("exec policy (the node listens on loopback only)", fields...)
	case len(p.Allow) == 0:
		n.log.Info("exec refuses every program: this node listens beyond loopback and has no --exec-allow policy",
			append(fields, zap.Strings("listening", exposed))...)
	case slices.Contains(p.Allow, wag.ExecAllowAny):
		n.log.Warn("exec runs any program (--exec-allow '*') on a node that listens beyond loopback: whoever may submit workflows to the mesh can run any program here",
			append(fields, zap.Strings("listening", exposed))...)
	default:
		n.log.Info("exec policy", fields...)
	}
}
