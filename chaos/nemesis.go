package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The mesh's services, as docker-compose.yml names them.
var (
	Servers = []string{"s1", "s2", "s3"}
	Workers = []string{"w1", "w2", "w3"}
	// Capabilities is what each worker serves.
	Capabilities = map[string][]string{"w1": {"core", "compute"}, "w2": {"compute"}, "w3": {"core"}}
)

// FaultKind names a fault the nemesis injects.
type FaultKind string

// The faults. Clock skew is not among them: containers share the host
// kernel's clock, and the images hold no faketime library to lie to one.
const (
	KillWorker        FaultKind = "kill-worker"        // SIGKILL of a random worker node, started again after the hold
	KillLeader        FaultKind = "kill-leader"        // SIGKILL of the engine leader
	KillWaggler       FaultKind = "kill-waggler"       // SIGKILL of the node holding a capability's Waggler role
	PauseWorker       FaultKind = "pause-worker"       // docker pause of a worker past the heartbeat deadline
	DisconnectWorker  FaultKind = "disconnect-worker"  // a worker cut off the network
	DisconnectLeader  FaultKind = "disconnect-leader"  // the engine leader cut off the network
	PartitionMinority FaultKind = "partition-minority" // one server and one worker cut off together
	RestartPostgres   FaultKind = "restart-postgres"   // the database's primary stopped and started, its data kept
	KillAndPause      FaultKind = "kill-and-pause"     // a worker killed and another paused at once
	// KillPostgresPrimary is a lost database host: SIGKILL of the
	// primary's container and removal of its data directory. The monitor
	// promotes a standby; the heal starts the container again, empty, and
	// pg_auto_failover rebuilds it as a standby.
	KillPostgresPrimary FaultKind = "kill-postgres-primary"
	// KillPostgresStandby is SIGKILL of a synchronous standby's container,
	// started again (data kept) at the heal; the other standby keeps
	// commits acknowledged on two hosts meanwhile.
	KillPostgresStandby FaultKind = "kill-postgres-standby"
	// PartitionPostgresPrimary cuts the primary off the servers' network
	// while it still reaches the monitor and the standbys on the database
	// network: for pg_auto_failover the hard case, since the monitor sees
	// a healthy primary and promotes nobody — the servers must wait it out
	// without losing or doubling work, and resume at the heal.
	PartitionPostgresPrimary FaultKind = "partition-postgres-primary"
	// PausePartitionOwner freezes (docker pause: the cgroup freezer, as
	// SIGSTOP) the server owning the most partitions for the hold, past
	// their reassignment, then thaws it: it resumes believing it still
	// owns them, and the store refuses its writes (the partitions were
	// fenced at higher epochs), so nothing is recorded twice. While the
	// Raft leader owns every partition, that server is the leader.
	PausePartitionOwner FaultKind = "pause-partition-owner"
	// KillPartitionOwner is SIGKILL of a server that owns partitions but
	// is not the Raft leader (the one owning the most; the leader when it
	// owns them all), started again after the hold: its partitions move
	// to the others at higher epochs, and the attempts its engine had in
	// flight are taken over, not run twice.
	KillPartitionOwner FaultKind = "kill-partition-owner"
)

// AllFaults lists every kind, in the order a smoke run injects them.
var AllFaults = []FaultKind{KillWorker, KillLeader, KillWaggler, PauseWorker, DisconnectWorker,
	DisconnectLeader, PartitionMinority, RestartPostgres, KillAndPause,
	KillPostgresPrimary, KillPostgresStandby, PartitionPostgresPrimary, PausePartitionOwner, KillPartitionOwner}

// Fault is one injected fault.
type Fault struct {
	Kind    FaultKind `json:"kind"`
	Targets []string  `json:"targets"`
	At      time.Time `json:"at"`
	// Injected is when the fault was in place: the docker commands that
	// inject it had returned (a killed container is dead by then).
	// Recovery and stall are measured from it.
	Injected time.Time `json:"injected"`
	Healed   time.Time `json:"healed"`
	// Capabilities are those whose work it disturbed (none named: all).
	Capabilities []string `json:"capabilities,omitempty"`
	// Recovery is from Injected to the next task of an affected capability
	// completed (filled in by the checker); -1 when none followed.
	Recovery time.Duration `json:"recovery_ns"`
	// Stall is the longest time without a completion of an affected
	// capability from Injected until StallWindow after the heal: how long the
	// fault really held that work up (Recovery can be short when a write
	// in flight at the fault lands just after it).
	Stall time.Duration `json:"stall_ns"`
	// Rejoin, for a fault that cut a server off the network, is from the
	// heal until that server is a voter that knows the leader and every
	// other server sees it alive (the longest, if several were cut); -1
	// when it was not within RejoinWait; 0 when no server was cut.
	Rejoin time.Duration `json:"rejoin_ns,omitempty"`
	Error  string        `json:"error,omitempty"`
}

// RejoinLimit is how soon a server cut off and healed must be back: a
// voter that knows the leader (docs/architecture.md, the mesh); a slower
// rejoin fails the run. RejoinWait is how long it is waited for.
const (
	RejoinLimit = 5 * time.Second
	RejoinWait  = time.Minute
)

// Nemesis injects faults into a Compose project and heals them.
type Nemesis struct {
	Compose *Compose
	Client  *Client
	// DB says which data node is the primary.
	DB  *Database
	Log *zap.Logger
	// Hold is how long a fault lasts before it is healed.
	Hold time.Duration
	// StandbyLag, when set, makes kill-postgres-primary first stop the
	// primary's WAL senders for this long, so that the standbys fall
	// behind as a slow network or disk would make them: commits made
	// meanwhile are on the primary alone if replication is asynchronous
	// (and lost with it), while synchronous replication makes them wait
	// instead.
	StandbyLag time.Duration
	rng        *rand.Rand

	mu     sync.Mutex
	faults []Fault
	// heal undoes what is still broken (a fault whose heal failed).
	heal []func(context.Context) error
}

// NewNemesis returns a nemesis with its own random source.
func NewNemesis(c *Compose, cl *Client, db *Database, log *zap.Logger, hold time.Duration) *Nemesis {
	return &Nemesis{Compose: c, Client: cl, DB: db, Log: log, Hold: hold, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))}
}

func (n *Nemesis) pick(from []string, not ...string) string {
	var c []string
	for _, s := range from {
		if !slices.Contains(not, s) {
			c = append(c, s)
		}
	}
	return c[n.rng.IntN(len(c))]
}

// Inject injects one fault of kind, holds it, heals it, and records it.
// An error means the fault could not be injected or healed; what is still
// broken is healed by HealAll.
func (n *Nemesis) Inject(ctx context.Context, kind FaultKind) error {
	f := Fault{Kind: kind, Recovery: -1}
	var (
		do   []func(context.Context) error
		undo []func(context.Context) error
	)
	c := n.Compose
	kill := func(svc string) {
		f.Targets = append(f.Targets, svc)
		f.Capabilities = append(f.Capabilities, Capabilities[svc]...)
		do = append(do, func(ctx context.Context) error { return c.Kill(ctx, svc) })
		undo = append(undo, func(ctx context.Context) error { return c.Start(ctx, svc) })
	}
	pause := func(svc string) {
		f.Targets = append(f.Targets, svc)
		f.Capabilities = append(f.Capabilities, Capabilities[svc]...)
		do = append(do, func(ctx context.Context) error { return c.Pause(ctx, svc) })
		undo = append(undo, func(ctx context.Context) error { return c.Unpause(ctx, svc) })
	}
	var cutServers []string
	cut := func(svc string) {
		if slices.Contains(Servers, svc) {
			cutServers = append(cutServers, svc)
		}
		f.Targets = append(f.Targets, svc)
		f.Capabilities = append(f.Capabilities, Capabilities[svc]...)
		var ip string
		do = append(do, func(ctx context.Context) (err error) { ip, err = c.Disconnect(ctx, svc, MeshNetwork); return err })
		undo = append(undo, func(ctx context.Context) error { return c.Connect(ctx, svc, MeshNetwork, ip) })
	}
	// roles waits (a previous fault may still be healing) for a primary and
	// at least one standby in sync, as the monitor sees them.
	roles := func() (string, []string, error) {
		return n.DB.Settled(ctx, 1, 2*time.Minute)
	}
	leader := func() (string, error) {
		name, err := n.Client.Leader(ctx)
		if err == nil && name == "" {
			err = errors.New("no engine leader")
		}
		return name, err
	}
	switch kind {
	case KillWorker:
		kill(n.pick(Workers))
	case KillLeader:
		l, err := leader()
		if err != nil {
			return n.record(f, err)
		}
		kill(l)
	case KillWaggler:
		roles, err := n.Client.Wagglers(ctx)
		if err != nil {
			return n.record(f, err)
		}
		capability := n.pick([]string{"core", "compute"})
		if roles[capability] == "" {
			return n.record(f, fmt.Errorf("no Waggler holds %s", capability))
		}
		kill(roles[capability])
		f.Capabilities = []string{capability}
	case PauseWorker:
		pause(n.pick(Workers))
	case PausePartitionOwner, KillPartitionOwner:
		owners, err := n.Client.PartitionOwners(ctx)
		if err == nil && len(owners) == 0 {
			err = errors.New("no server owns a partition")
		}
		if err != nil {
			return n.record(f, err)
		}
		if kind == PausePartitionOwner {
			pause(mostPartitions(owners))
			break
		}
		if l, err := leader(); err == nil && len(owners) > 1 {
			delete(owners, l) // a partition owner that is not the leader
		}
		kill(mostPartitions(owners))
	case DisconnectWorker:
		cut(n.pick(Workers))
	case DisconnectLeader:
		l, err := leader()
		if err != nil {
			return n.record(f, err)
		}
		cut(l)
	case PartitionMinority:
		cut(n.pick(Servers))
		cut(n.pick(Workers))
	case RestartPostgres:
		primary, _, err := roles()
		if err != nil {
			return n.record(f, err)
		}
		f.Targets = []string{primary}
		do = append(do, func(ctx context.Context) error { return c.Restart(ctx, primary) })
		undo = append(undo, nil) // a restart heals itself
	case KillPostgresPrimary:
		primary, _, err := roles()
		if err != nil {
			return n.record(f, err)
		}
		f.Targets = []string{primary}
		lag := n.StandbyLag
		do = append(do, func(ctx context.Context) error {
			if lag > 0 {
				// The standbys fall behind: the primary's WAL senders stop
				// shipping (SIGSTOP) for lag before it dies.
				if err := c.SignalWALSenders(ctx, primary, "STOP"); err != nil {
					return err
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(lag):
				}
			}
			if err := c.Kill(ctx, primary); err != nil {
				return err
			}
			return c.WipeData(ctx, primary)
		})
		undo = append(undo, func(ctx context.Context) error { return c.Start(ctx, primary) })
	case KillPostgresStandby:
		_, standbys, err := roles()
		if err != nil {
			return n.record(f, err)
		}
		kill(n.pick(standbys))
	case PartitionPostgresPrimary:
		primary, _, err := roles()
		if err != nil {
			return n.record(f, err)
		}
		cut(primary)
	case KillAndPause:
		w := n.pick(Workers)
		kill(w)
		pause(n.pick(Workers, w))
	default:
		return fmt.Errorf("unknown fault kind %q", kind)
	}
	f.At = time.Now()
	n.Log.Info("fault", zap.String("kind", string(kind)), zap.Strings("targets", f.Targets))
	var errs []error
	for i, d := range do {
		if err := d(ctx); err != nil {
			errs = append(errs, err)
			undo[i] = nil // nothing to undo
		}
	}
	f.Injected = time.Now()
	if slices.ContainsFunc(undo, func(u func(context.Context) error) bool { return u != nil }) {
		select {
		case <-ctx.Done():
		case <-time.After(n.Hold):
		}
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, u := range undo {
		if u == nil {
			continue
		}
		if err := u(hctx); err != nil {
			errs = append(errs, err)
			n.mu.Lock()
			n.heal = append(n.heal, u)
			n.mu.Unlock()
		}
	}
	f.Healed = time.Now()
	n.Log.Info("healed", zap.String("kind", string(kind)), zap.Strings("targets", f.Targets), zap.Duration("held", f.Healed.Sub(f.At)))
	if len(errs) == 0 {
		for _, s := range cutServers {
			back := n.rejoin(hctx, s, f.Healed)
			if back < 0 || f.Rejoin < 0 {
				f.Rejoin = -1
			} else {
				f.Rejoin = max(f.Rejoin, back)
			}
			n.Log.Info("rejoined", zap.String("server", s), zap.Duration("after_heal", back))
		}
	}
	return n.record(f, errors.Join(errs...))
}

// rejoin waits until server, healed at healed, is back: it names a leader,
// and another server names the same one and lists it as an alive voter.
// It returns the time from the heal, or -1 after RejoinWait.
func (n *Nemesis) rejoin(ctx context.Context, server string, healed time.Time) time.Duration {
	self := slices.Index(Servers, server)
	ctx, cancel := context.WithDeadline(ctx, healed.Add(RejoinWait))
	defer cancel()
	for {
		n.Client.Redial(self)
		if n.rejoined(ctx, self, server) {
			return time.Since(healed)
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *Nemesis) rejoined(ctx context.Context, self int, server string) bool {
	var leader string
	err := n.Client.On(ctx, self, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := robonetv1.NewMeshServiceClient(conn).GetLeader(ctx, &robonetv1.GetLeaderRequest{})
		leader = r.GetName()
		return err
	})
	if err != nil || leader == "" {
		return false
	}
	for other := range Servers {
		if other == self {
			continue
		}
		ok := false
		err := n.Client.On(ctx, other, func(ctx context.Context, conn *grpc.ClientConn) error {
			mesh := robonetv1.NewMeshServiceClient(conn)
			l, err := mesh.GetLeader(ctx, &robonetv1.GetLeaderRequest{})
			if err != nil || l.GetName() != leader {
				return err
			}
			r, err := mesh.ListMembers(ctx, &robonetv1.ListMembersRequest{})
			for _, m := range r.GetMembers() {
				ok = ok || m.GetName() == server && m.GetStatus() == "alive" && m.GetVoter()
			}
			return err
		})
		if err == nil && ok {
			return true
		}
	}
	return false
}

func (n *Nemesis) record(f Fault, err error) error {
	if err != nil {
		f.Error = err.Error()
		n.Log.Warn("fault not injected or healed cleanly", zap.String("kind", string(f.Kind)), zap.Error(err))
	}
	if f.At.IsZero() {
		f.At = time.Now()
		f.Healed = f.At
	}
	n.mu.Lock()
	n.faults = append(n.faults, f)
	n.mu.Unlock()
	return err
}

// HealAll retries every heal that failed, and makes sure every container
// of the mesh runs unpaused on the network.
func (n *Nemesis) HealAll(ctx context.Context) error {
	n.mu.Lock()
	pending := n.heal
	n.heal = nil
	n.mu.Unlock()
	var errs []error
	for _, u := range pending {
		if err := u(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, svc := range allServices() {
		_ = n.Compose.Unpause(ctx, svc) // not paused: an error, ignored
		_ = n.Compose.Start(ctx, svc)   // running: a no-op
	}
	return errors.Join(errs...)
}

// Faults returns the faults injected so far.
func (n *Nemesis) Faults() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.faults)
}

// Random picks a fault kind at random.
func (n *Nemesis) Random() FaultKind {
	return AllFaults[n.rng.IntN(len(AllFaults))]
}

// allServices are every service of docker-compose.yml: the database first,
// then the servers and the workers.
func allServices() []string {
	return slices.Concat([]string{Monitor}, PostgresNodes, Servers, Workers)
}

// mostPartitions is the owner of the most partitions (the smaller name
// among equals).
func mostPartitions(owners map[string]int) string {
	best := ""
	for _, o := range slices.Sorted(maps.Keys(owners)) {
		if best == "" || owners[o] > owners[best] {
			best = o
		}
	}
	return best
}
