package node

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/audit"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/connect"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/trust"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/tasklog"
)

// resultRoom is what a result message holds besides a task's output: its
// key, worker and stamp, in far less than the error text a failed result
// may carry instead (wag.MaxErrorBytes).
const resultRoom = wag.MaxErrorBytes

// Defaults of Config.
const (
	DefaultDataDir         = "robonode-data"
	DefaultGRPCAddr        = "127.0.0.1:7233"
	DefaultHTTPAddr        = "127.0.0.1:7280"
	DefaultMaxMessageBytes = 16 << 20
	DefaultMaxSpecBytes    = 1 << 20
	DefaultMaxInputBytes   = 1 << 20
	// DefaultMaxSignalBytes bounds a signal's payload (Config.MaxSignalBytes).
	DefaultMaxSignalBytes = 64 << 10
	// DefaultMaxStreams bounds the concurrent calls (watch streams
	// included) on one client connection.
	DefaultMaxStreams     = 256
	DefaultStopTimeout    = 30 * time.Second
	DefaultGossipAddr     = "127.0.0.1:7301"
	DefaultRaftAddr       = "127.0.0.1:7302"
	DefaultForwardTimeout = 10 * time.Second
	// DefaultPoolStatsInterval is the default of Config.PoolStatsInterval.
	DefaultPoolStatsInterval = 15 * time.Second
	// DefaultWorkerMinRuntime is the default of Config.WorkerMinRuntime:
	// less than the round trip of an attempt to a program and its answer
	// back over loopback, so that only a program that answers attempts
	// before it could have received them trips it, whatever its work. (A
	// Go program answering at once took 97 µs at the fastest, over 400
	// attempts on a busy 2-core machine; 100 µs would count honest ones.)
	DefaultWorkerMinRuntime = 20 * time.Microsecond
	// HTTPDisabled as Config.HTTPAddr turns the HTTP server off.
	HTTPDisabled = "off"
)

// DefaultCapabilities is the capability set of a node started without
// --capability, sized to the machine so that every example workflow runs:
//
//	core          4×CPUs, at least 8   echo and sleep: cheap, mostly waiting
//	code.exec     2×CPUs, at least 4   exec children: CPU-bound or waiting on I/O
//	net.scan      4×CPUs, at least 8   network-bound probes
//	net.http      4×CPUs, at least 8   network-bound calls
//	ai.inference  1                    placeholder for a GPU or a model server
func DefaultCapabilities() map[string]int {
	cpus := runtime.NumCPU()
	return map[string]int{
		"core":         max(4*cpus, 8),
		"code.exec":    max(2*cpus, 4),
		"net.scan":     max(4*cpus, 8),
		"net.http":     max(4*cpus, 8),
		"ai.inference": 1,
	}
}

// Config configures a Node. Zero fields take defaults (WithDefaults).
type Config struct {
	// Name names the node in logs and worker ids. Default: the host name.
	Name string
	// DataDir holds the node's durable files: the SQLite database
	// (robonet.db) unless PostgresDSN is set, and on servers the Raft log,
	// stable store and snapshots. Created if missing. Default:
	// ./robonode-data.
	DataDir string
	// PostgresDSN, when set, puts the engine's state in Postgres instead of
	// SQLite.
	PostgresDSN string
	// PostgresSchema, when set, is the schema the store's tables live in
	// (tests use one per test).
	PostgresSchema string
	// GRPCAddr is the listen address of the gRPC API (host:port; port 0
	// picks a free one, see Node.GRPCAddr). Default: 127.0.0.1:7233.
	GRPCAddr string
	// HTTPAddr is the listen address of /healthz and /readyz, or "off".
	// Default: 127.0.0.1:7280.
	HTTPAddr string
	// EnableDebug serves Go's profiler (/debug/pprof/) on the HTTP
	// listener. Off by default: profiles expose the node's internals and
	// cost CPU while they run; keep HTTPAddr on a trusted interface.
	EnableDebug bool
	// Capabilities maps each capability this node serves to its worker pool
	// size. nil: DefaultCapabilities().
	Capabilities map[string]int
	// Logger receives the node's logs; each service gets a named child.
	// nil: no logs.
	Logger *zap.Logger
	// Clock is the source of time of the node's own services (trust and
	// the Sentinel); the engine and the Waggler layer take theirs from
	// their own configs. nil: the system clock.
	Clock clock.Clock
	// MaxMessageBytes bounds gRPC messages received and sent. Default:
	// 16 MiB.
	MaxMessageBytes int
	// MaxSpecBytes bounds an inline spec. Default: 1 MiB.
	MaxSpecBytes int
	// MaxInputBytes bounds the inputs of one submission, as JSON. Default:
	// 1 MiB.
	MaxInputBytes int
	// MaxSignalBytes bounds the payload of one signal (SignalInstance), as
	// JSON. Default: 64 KiB.
	MaxSignalBytes int
	// MaxStreams bounds the concurrent calls, watch streams included, on
	// one client connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a
	// client that opens more waits for one to end. Default: 256.
	MaxStreams int
	// StopTimeout bounds a graceful gRPC stop (streams are cut after it).
	// Default: 30 s.
	StopTimeout time.Duration

	// Join lists gossip addresses (host:port) of nodes already in a mesh;
	// the node joins through the first that answers, retrying with backoff
	// until the mesh's JoinTimeout. Empty: the node starts a mesh of its
	// own.
	Join []string
	// Advertise is the host (IP address or name) other nodes reach this
	// node at: its gossip, Raft and gRPC addresses in the mesh carry it.
	// Empty: the host each listener binds to (or, for a wildcard bind, the
	// address gossip picks).
	Advertise string
	// Server makes the node a Raft server, which may lead the engine and
	// opens the store. nil: a server when Join is empty (a node of its
	// own), a worker-only node when it joins a mesh.
	Server *bool
	// BootstrapExpect is the number of servers that must see each other
	// before the first Raft configuration is bootstrapped (never with
	// fewer, never twice). Servers only. Default: 1.
	BootstrapExpect int
	// GossipAddr is the listen address of memberlist (host:port; port 0
	// picks a free one, see Node.GossipAddr). Default: 127.0.0.1:7301.
	GossipAddr string
	// RaftAddr is the listen address of the Raft transport (servers only;
	// port 0 picks a free one). Default: 127.0.0.1:7302.
	RaftAddr string
	// GossipKey, when set, encrypts gossip (AES; 16, 24 or 32 bytes). Every
	// node of a mesh needs the same key.
	GossipKey []byte

	// TLS, when its files are set, is the node's identity in the mesh: a
	// certificate that names it (Name), signed by the mesh CA. Every
	// connection between nodes — API forwarding, Waggler and worker
	// streams, Raft — is then mutual TLS, and the API is served over TLS.
	// A server needs a server certificate (robonode tls cert create
	// --server).
	TLS pki.Files
	// APITokenFile, when set, names the file of the bearer tokens a client
	// (roboctl, a worker program) must present, a line per token:
	// TOKEN name=NAME role=ROLE [workflows=GLOB,…] [capabilities=GLOB,…]
	// (package access; a line holding only a token is an admin). The node
	// re-reads it when it changes (and on ReloadTokens): tokens are added
	// and revoked without a restart. Calls from other nodes authenticate
	// with their certificates instead. Only the tokens' SHA-256 digests
	// are kept.
	APITokenFile string
	// APITokens are admin tokens given in code (tests, the demo), used
	// when APITokenFile is not set. Each is at least 16 bytes.
	APITokens []string
	// Insecure allows listening beyond loopback without TLS, API tokens
	// or a gossip key. Without it such a node refuses to start: anyone
	// who can reach it could run commands through the exec action.
	Insecure bool
	// ExecAllow is the node's exec policy (--exec-allow): the programs the
	// exec action may run, as absolute paths or globs, "*" for any, "none"
	// for none (wag.ExecPolicy says how programs are matched). Empty: any
	// program on a node that listens on loopback only, none on a node that
	// listens beyond it.
	ExecAllow []string
	// ExecUser, when set, runs exec'd programs as that user (--exec-user;
	// a name or a uid); only a node running as root may switch.
	ExecUser string
	// DispatchTier is the trust tier (unverified, provisional, established
	// or trusted) a worker node needs to run as many attempts at once as
	// it has slots for this node's Wagglers; below it, it is on probation
	// (one attempt at a time, one more per attempt it completes). Default:
	// established.
	DispatchTier string
	// TrustPeers are nodes trusted from the start (operators vouch for
	// them), by name; "*" trusts every node (a mesh of one owner's
	// machines, where probation only slows the start). A node that forges
	// a hash-chain token loses this trust all the same. Worker programs
	// are trust subjects of their own, NODE/PROGRAM, not covered by "*":
	// name one, every program of a node (NODE/*) or every program (*/*).
	TrustPeers []string
	// AllowWorkerBuiltins names the built-in actions (exec, http, sleep,
	// echo) a worker program connected to this node may claim as its own;
	// "*" allows them all. Default: none — a program that claims one is
	// refused, so an attempt that asks for exec never reaches a program.
	AllowWorkerBuiltins []string
	// WorkerMinRuntime is the floor of how soon a worker program may
	// answer an attempt after this node sent it: a sooner answer is
	// counted as misbehaviour (robonet_worker_program_misbehaviour_total,
	// and against the program's trust), faster than any real work — a
	// program answering attempts before it could have seen them. Raise it
	// to what the capability's work takes at least. Zero means
	// DefaultWorkerMinRuntime; negative means no floor.
	WorkerMinRuntime time.Duration
	// Faults inject misbehaviour, for tests and chaos drills. nil in
	// production.
	Faults *Faults
	// ForwardTimeout bounds how long a node that does not lead waits for
	// a leader to forward a call to (retrying with backoff while an
	// election is in progress) before it answers UNAVAILABLE. Default: 10 s.
	ForwardTimeout time.Duration
	// PoolStatsInterval is how often the leader collects every member's
	// worker pool statistics into the store (worker_status). Default: 15 s.
	PoolStatsInterval time.Duration

	// TaskLogs bounds the task logs this node keeps of the exec attempts
	// it runs, in DataDir/tasklogs (package tasklog; zero fields take its
	// defaults: 4 MiB per attempt, 1 GiB per node, 72 h).
	TaskLogs tasklog.Limits
	// AuditFileBytes bounds the audit trail, DataDir/audit: past it the
	// file becomes audit.1 (replacing the one before) and a new one
	// starts, so the trail takes at most twice this. Default: 16 MiB; at
	// least 64 KiB.
	AuditFileBytes int64

	// Mesh tunes gossip and Raft. Its Name, addresses, Join, Meta, Server,
	// BootstrapExpect, DataDir, GossipKey, WagglerRank and Logger are set
	// by the node;
	// zero fields take the mesh's defaults (mesh.TestConfig gives tight
	// timings for tests).
	Mesh mesh.Config
	// Engine tunes the engine. Its Store, Dispatcher, Logger, NodeName and
	// Term are set by the node; zero fields take the engine's defaults.
	Engine engine.Config
	// Wag tunes the worker layer. Its Sink, Logger, NodeName, Trust,
	// Capabilities and Exec (from ExecAllow and ExecUser) are set by the
	// node; zero fields take wag's defaults.
	Wag wag.Config
}

// checkTrustPeer checks a name vouched for (TrustPeers): a node, "*"
// (every node), a worker program NODE/PROGRAM, NODE/* (every program of
// NODE) or */* (every program).
func checkTrustPeer(p string) error {
	node, program, isProgram := strings.Cut(p, "/")
	if p == "" || len(p) > 256 || node == "" || (isProgram && (program == "" || strings.Contains(program, "/") || node == "*" && program != "*")) {
		return fmt.Errorf("trusted peer %q: name a node, NODE/PROGRAM for a worker program, * for every node, NODE/* or */* for worker programs", p)
	}
	return nil
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		c.Name, _ = os.Hostname()
		if c.Name == "" {
			c.Name = "robonode"
		}
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = DefaultGRPCAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.Capabilities == nil {
		c.Capabilities = DefaultCapabilities()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.WorkerMinRuntime == 0 {
		c.WorkerMinRuntime = DefaultWorkerMinRuntime
	}
	if c.MaxSpecBytes == 0 {
		c.MaxSpecBytes = DefaultMaxSpecBytes
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = DefaultMaxInputBytes
	}
	if c.MaxSignalBytes == 0 {
		c.MaxSignalBytes = DefaultMaxSignalBytes
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	c.Join = slices.Clone(c.Join)
	server := len(c.Join) == 0
	if c.Server != nil {
		server = *c.Server
	}
	c.Server = &server // a copy: the caller's pointer is never shared
	if c.BootstrapExpect == 0 && server {
		c.BootstrapExpect = 1
	}
	if c.GossipAddr == "" {
		c.GossipAddr = DefaultGossipAddr
	}
	if c.RaftAddr == "" {
		c.RaftAddr = DefaultRaftAddr
	}
	if c.DispatchTier == "" {
		c.DispatchTier = trust.Established.String()
	}
	if c.PoolStatsInterval == 0 {
		c.PoolStatsInterval = DefaultPoolStatsInterval
	}
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = DefaultForwardTimeout
	}
	if c.AuditFileBytes == 0 {
		c.AuditFileBytes = audit.DefaultMaxBytes
	}
	return c
}

// IsServer reports whether a config that went through WithDefaults is a
// server's.
func (c Config) IsServer() bool { return c.Server != nil && *c.Server }

// ErrMeshNeedsPostgres is the configuration error of a server that would
// share a mesh with other servers on the embedded SQLite store.
var ErrMeshNeedsPostgres = errors.New("a mesh with more than one server needs a shared Postgres store: " +
	"the embedded SQLite store lives on one node and cannot follow the engine leader to another; " +
	"start every server with --postgres DSN (the same database for all), " +
	"or run this node as a worker with --server=false")

// validate checks a config that went through WithDefaults. The engine and
// wag validate their own parts in their constructors.
func (c Config) validate() error {
	var errs []error
	if err := pki.CheckNodeName(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("%w (--name)", err))
	}
	if _, _, err := net.SplitHostPort(c.GRPCAddr); err != nil {
		errs = append(errs, fmt.Errorf("gRPC address %q: want host:port", c.GRPCAddr))
	}
	if c.HTTPAddr != HTTPDisabled {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("HTTP address %q: want host:port or %q", c.HTTPAddr, HTTPDisabled))
		}
	}
	if c.MaxMessageBytes < 1024 {
		errs = append(errs, fmt.Errorf("MaxMessageBytes %d is too small (at least 1024)", c.MaxMessageBytes))
	}
	if c.MaxSpecBytes < 1 || c.MaxSpecBytes > c.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("MaxSpecBytes %d must be between 1 and MaxMessageBytes (%d)", c.MaxSpecBytes, c.MaxMessageBytes))
	}
	if c.MaxInputBytes < 1 || c.MaxInputBytes > c.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("MaxInputBytes %d must be between 1 and MaxMessageBytes (%d)", c.MaxInputBytes, c.MaxMessageBytes))
	}
	if c.MaxSignalBytes < 1 || c.MaxSignalBytes > c.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("MaxSignalBytes %d must be between 1 and MaxMessageBytes (%d)", c.MaxSignalBytes, c.MaxMessageBytes))
	}
	// A task's output crosses to the leader in one message, beside its
	// key and worker; an output that cannot would be sent again and again.
	if out := cmp.Or(c.Wag.MaxOutputBytes, wag.DefaultMaxOutputBytes); out > c.MaxMessageBytes-resultRoom {
		errs = append(errs, fmt.Errorf("the output limit (output-bytes, %d) must leave %d bytes of the message limit (message-bytes, %d) for the rest of a result: lower output-bytes to at most %d or raise message-bytes",
			out, resultRoom, c.MaxMessageBytes, c.MaxMessageBytes-resultRoom))
	}
	if c.MaxStreams < 1 {
		errs = append(errs, fmt.Errorf("MaxStreams %d must be at least 1", c.MaxStreams))
	}
	if _, err := trust.ParseTier(c.DispatchTier); err != nil {
		errs = append(errs, fmt.Errorf("dispatch tier: %w", err))
	}
	for _, p := range c.TrustPeers {
		if err := checkTrustPeer(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range c.AllowWorkerBuiltins {
		if a != "*" && !slices.Contains(wag.BuiltinActions(), a) {
			errs = append(errs, fmt.Errorf("allowed worker built-in %q: name one of %s, or * for all", a, strings.Join(wag.BuiltinActions(), ", ")))
		}
	}
	if c.StopTimeout < 0 {
		errs = append(errs, errors.New("StopTimeout must not be negative"))
	}
	for _, a := range []struct{ name, addr string }{{"gossip", c.GossipAddr}, {"Raft", c.RaftAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s address %q: want host:port", a.name, a.addr))
		}
	}
	for _, j := range c.Join {
		if strings.TrimSpace(j) == "" {
			errs = append(errs, errors.New("join: an empty address"))
		}
	}
	if strings.Contains(c.Advertise, ":") && net.ParseIP(c.Advertise) == nil {
		errs = append(errs, fmt.Errorf("advertise %q: want a host (an IP address or a name) without a port", c.Advertise))
	}
	switch len(c.GossipKey) {
	case 0, 16, 24, 32:
	default:
		errs = append(errs, fmt.Errorf("gossip key: %d bytes; want 16, 24 or 32 (AES-128, -192 or -256)", len(c.GossipKey)))
	}
	if c.ForwardTimeout < 0 {
		errs = append(errs, errors.New("ForwardTimeout must not be negative"))
	}
	if err := c.checkExposure(); err != nil {
		errs = append(errs, err)
	}
	if err := c.execPolicy().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.IsServer() {
		if c.BootstrapExpect < 1 {
			errs = append(errs, fmt.Errorf("bootstrap-expect %d: want at least 1", c.BootstrapExpect))
		}
		// More than one server: the store must be shared.
		if (c.BootstrapExpect > 1 || len(c.Join) > 0) && c.PostgresDSN == "" {
			errs = append(errs, ErrMeshNeedsPostgres)
		}
	} else if c.BootstrapExpect > 0 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d: only servers bootstrap Raft (this node is worker-only)", c.BootstrapExpect))
	}
	if c.AuditFileBytes < audit.MinMaxBytes {
		errs = append(errs, fmt.Errorf("AuditFileBytes %d is too small (at least %d)", c.AuditFileBytes, audit.MinMaxBytes))
	}
	names := make([]string, 0, len(c.Capabilities))
	for n := range c.Capabilities {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if c.Capabilities[n] < 1 {
			errs = append(errs, fmt.Errorf("capability %s: pool size %d must be at least 1", n, c.Capabilities[n]))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("node config: %w", errors.Join(errs...))
	}
	return nil
}

// ErrInsecure is the configuration error of a node that would listen
// beyond loopback without its defences.
var ErrInsecure = errors.New("listening beyond this machine without credentials")

// checkExposure refuses a node that listens on an address other machines
// can reach while it lacks TLS, API tokens or a gossip key, unless
// Insecure is set.
func (c Config) checkExposure() error {
	if c.Insecure {
		return nil
	}
	exposed := c.exposed()
	if len(exposed) == 0 {
		return nil
	}
	var missing []string
	if !c.TLS.Set() {
		missing = append(missing, "mutual TLS (--tls-ca, --tls-cert, --tls-key; robonode tls ca create, then robonode tls cert create --name "+c.Name+")")
	}
	if len(c.APITokens) == 0 && c.APITokenFile == "" {
		missing = append(missing, "API tokens (--api-token-file FILE; e.g. head -c 32 /dev/urandom | base64 > FILE)")
	}
	if len(c.GossipKey) == 0 {
		missing = append(missing, "a gossip key (--gossip-key; robonode keyring generate)")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the node listens on %s, which other machines can reach, without %s: "+
		"anyone who reaches it could run commands through the exec action. "+
		"Set them up, bind to 127.0.0.1, or pass --insecure to run without them anyway",
		ErrInsecure, strings.Join(exposed, ", "), strings.Join(missing, ", "))
}

// exposed lists the addresses the node listens on that other machines can
// reach (anything but loopback): the gRPC API, gossip, Raft on servers and
// HTTP when it serves the profiler. Empty: only this machine reaches the
// node.
func (c Config) exposed() []string {
	addrs := []string{c.GRPCAddr, c.GossipAddr}
	if c.IsServer() {
		addrs = append(addrs, c.RaftAddr)
	}
	if c.HTTPAddr != HTTPDisabled && c.EnableDebug {
		addrs = append(addrs, c.HTTPAddr)
	}
	var exposed []string
	for _, a := range addrs {
		if !connect.Loopback(a) {
			exposed = append(exposed, a)
		}
	}
	return exposed
}

// taskLogDir is where the node keeps task logs.
func (c Config) taskLogDir() string { return filepath.Join(c.DataDir, "tasklogs") }

// auditPath is the node's audit trail (and auditPath()+".1" the one
// before).
func (c Config) auditPath() string { return filepath.Join(c.DataDir, "audit") }

// sqlitePath is where the embedded store lives.
func (c Config) sqlitePath() string { return filepath.Join(c.DataDir, "robonet.db") }

// ErrConfig wraps every configuration error of New, so that a command can
// tell a bad configuration (exit code 2) from a failure to run.
var ErrConfig = errors.New("invalid configuration")
