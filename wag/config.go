package wag

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/metrics"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag/tasklog"
)

// Defaults of Config.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultMissedHeartbeats  = 3
	DefaultMaxOutputBytes    = 1 << 20
	DefaultQueueSize         = 4096
	DefaultCancelGrace       = 10 * time.Second
	DefaultNodeName          = "local"

	// MaxPoolSize bounds the workers of one capability on one node.
	MaxPoolSize = 1024
)

// capabilityRE is the capability syntax of workflow specs.
var capabilityRE = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$`)

// Config configures the Waggler layer of a node: its worker pools
// (WorkerHost) and its Wagglers (WagglerHost). Every field has a default
// (WithDefaults).
type Config struct {
	// NodeName names this node in worker ids and logs (default "local").
	NodeName string
	// Capabilities maps each capability this node serves to the size of its
	// worker pool (1..1024), as given by --capability NAME=SIZE. A node may
	// serve none: its tasks wait for workers elsewhere.
	Capabilities map[string]int
	// Registry holds the actions workers run; nil means NewRegistry(), the
	// built-ins.
	Registry *Registry
	// Logger is named "wag" here; nil means no logs.
	Logger *zap.Logger
	// Clock is the source of time; nil means the system clock.
	Clock clock.Clock
	// HeartbeatInterval is how often a worker reports each running attempt
	// (default 5s).
	HeartbeatInterval time.Duration
	// MissedHeartbeats is the number of missed intervals after which a
	// worker is declared dead (default 3).
	MissedHeartbeats int
	// MaxOutputBytes caps an attempt's output, encoded as JSON, and the
	// stdout and response bodies the built-ins read (default 1 MiB).
	MaxOutputBytes int
	// QueueSize bounds the attempts queued per capability (default 4096):
	// while that many wait, Dispatch returns ErrBusy. It is checked before a
	// batch is added, so one batch larger than the bound is still accepted
	// by an empty queue and the engine never has to split batches.
	QueueSize int
	// CancelGrace is how long a cancelled or timed-out action has to return
	// before its worker abandons it and takes the next task (default 10s).
	CancelGrace time.Duration
	// InheritGrace is how long a successor Waggler waits for the worker of
	// an attempt it inherited to register with it before the heartbeat
	// ladder judges that worker: the worker first has to learn of the new
	// Waggler (gossip) and connect. A worker whose node the mesh declares
	// dead fails over at once regardless. Default: six heartbeat intervals,
	// at least 5 s.
	InheritGrace time.Duration
	// ServingNodes, when set, names the nodes the mesh has up that serve
	// a capability (known is false while membership is not known). A
	// successor Waggler holds back an attempt that may run on a worker no
	// one named (Handoff.MayRun) until a worker of each of these nodes
	// has registered with it; without it, for the whole InheritGrace.
	ServingNodes func(capability string) (nodes []string, known bool)

	// Exec bounds what the exec action runs on this node and as whom
	// (--exec-allow, --exec-user); the zero value runs any program as the
	// node's user.
	Exec ExecPolicy

	// TaskLogs, when set, keeps each exec attempt's stderr and stdout on
	// this node (package tasklog); nil: only the end of stderr is kept, in
	// a failed attempt's error.
	TaskLogs *tasklog.Store

	// Metrics are the series the Wagglers record into (heartbeats,
	// failovers); nil: series registered nowhere.
	Metrics *metrics.Wag

	// Trust, when set, bounds how many attempts at once each node's
	// workers, and each worker program's, may run (the trust they earned)
	// and is told what they do; nil: every worker runs what its slots
	// take, nothing is observed.
	Trust Trust

	// poolName names an external pool's slots (set by AddPool).
	poolName string
}

// Trust is what a Waggler needs of its node's trust in the workers. It is
// asked about trust subjects (package trust): a node, or a worker program
// connected to one, NODE/PROGRAM (WorkerSubject).
type Trust interface {
	// Allowance returns how many attempts at once a subject's workers may
	// run for this node's Wagglers (math.MaxInt: as many as they have
	// slots).
	Allowance(subject string) int
	// Rank returns a subject's trust tier as a number (trust.Tier; -1 once
	// it betrayed): among the workers an attempt may go to, those of the
	// highest rank are preferred.
	Rank(subject string) int
	// Observe is told what a Waggler saw a worker's subject do.
	Observe(o sentinel.Observation)
	// Quarantined is told the quarantined nodes and programs whenever the
	// leader names them: one that left the set was released and starts
	// again from zero trust.
	Quarantined(nodes map[string]bool)
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.NodeName == "" {
		c.NodeName = DefaultNodeName
	}
	if c.Registry == nil {
		c.Registry = NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewWag(nil)
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.MissedHeartbeats == 0 {
		c.MissedHeartbeats = DefaultMissedHeartbeats
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.InheritGrace == 0 {
		c.InheritGrace = max(6*c.HeartbeatInterval, 5*time.Second)
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.CancelGrace == 0 {
		c.CancelGrace = DefaultCancelGrace
	}
	return c
}

// validate checks a config that went through WithDefaults.
func (c Config) validate() error {
	var errs []error
	names := make([]string, 0, len(c.Capabilities))
	for name := range c.Capabilities {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		size := c.Capabilities[name]
		if !capabilityRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("capability %q: a name is lowercase dot-separated words of letters, digits and '-', e.g. code.exec", name))
		}
		if size < 1 || size > MaxPoolSize {
			errs = append(errs, fmt.Errorf("capability %q: pool size %d must be 1..%d (--capability %s=SIZE)", name, size, MaxPoolSize, name))
		}
	}
	if c.HeartbeatInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %v must be at least 1ms", c.HeartbeatInterval))
	}
	if c.MissedHeartbeats < 1 || c.MissedHeartbeats > 100 {
		errs = append(errs, fmt.Errorf("MissedHeartbeats %d must be 1..100", c.MissedHeartbeats))
	}
	if c.MaxOutputBytes < 1 {
		errs = append(errs, fmt.Errorf("MaxOutputBytes %d must be positive", c.MaxOutputBytes))
	}
	if c.QueueSize < 1 {
		errs = append(errs, fmt.Errorf("QueueSize %d must be positive", c.QueueSize))
	}
	if c.CancelGrace < 0 {
		errs = append(errs, fmt.Errorf("CancelGrace %v must not be negative", c.CancelGrace))
	}
	if err := c.Exec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wag: invalid config: %w", err)
	}
	return nil
}
