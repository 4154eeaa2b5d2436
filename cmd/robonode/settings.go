package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/node"
	"github.com/robonet/robonet/trust"
	"github.com/robonet/robonet/wag"
)

// A setting comes from, in order of precedence: its command-line flag, its
// environment variable ROBONET_<FLAG> (upper case, '-' as '_'), its key in
// the config file (the flag's name with '-' as '_'), its default.
//
//	flag                 env                        config file key
//	--name               ROBONET_NAME               name
//	--data-dir           ROBONET_DATA_DIR           data_dir
//	--bind               ROBONET_BIND               bind
//	--grpc               ROBONET_GRPC               grpc
//	--http               ROBONET_HTTP               http
//	--postgres           ROBONET_POSTGRES           postgres
//	--capability         ROBONET_CAPABILITY         capability (also: capabilities)
//	--join               ROBONET_JOIN               join
//	--advertise          ROBONET_ADVERTISE          advertise
//	--server             ROBONET_SERVER             server
//	--bootstrap-expect   ROBONET_BOOTSTRAP_EXPECT   bootstrap_expect
//	--partitions         ROBONET_PARTITIONS         partitions
//	--gossip             ROBONET_GOSSIP             gossip
//	--raft               ROBONET_RAFT               raft
//	--gossip-key         ROBONET_GOSSIP_KEY         gossip_key
//	--log-format         ROBONET_LOG_FORMAT         log_format
//	--log-level          ROBONET_LOG_LEVEL          log_level
//	--shutdown-timeout   ROBONET_SHUTDOWN_TIMEOUT   shutdown_timeout
//	--heartbeat-interval ROBONET_HEARTBEAT_INTERVAL heartbeat_interval
//	--missed-heartbeats  ROBONET_MISSED_HEARTBEATS  missed_heartbeats
//	--enable-debug       ROBONET_ENABLE_DEBUG       enable_debug
//	--cpu-profile        ROBONET_CPU_PROFILE        cpu_profile
//	--tls-ca             ROBONET_TLS_CA             tls_ca
//	--tls-cert           ROBONET_TLS_CERT           tls_cert
//	--tls-key            ROBONET_TLS_KEY            tls_key
//	--api-token-file     ROBONET_API_TOKEN_FILE     api_token_file
//	--insecure           ROBONET_INSECURE           insecure
//	--dispatch-tier      ROBONET_DISPATCH_TIER      dispatch_tier
//	--trust-peer         ROBONET_TRUST_PEER         trust_peer
//	--allow-worker-builtins ROBONET_ALLOW_WORKER_BUILTINS allow_worker_builtins
//	--worker-min-runtime ROBONET_WORKER_MIN_RUNTIME worker_min_runtime
//	--limit              ROBONET_LIMIT              limit (also: limits)
//	--exec-allow         ROBONET_EXEC_ALLOW         exec_allow
//	--exec-user          ROBONET_EXEC_USER          exec_user
//	--config             ROBONET_CONFIG             -
//
// --capability, --join, --trust-peer, --allow-worker-builtins, --limit and --exec-allow are repeatable; in the environment they
// are comma-separated lists (ROBONET_CAPABILITY=code.exec=8,core=16,
// ROBONET_JOIN=10.0.0.1:7301,10.0.0.2:7301); in the file a list (and for
// capabilities and limits also a map, {code.exec: 8}, {spec-bytes: 2MiB}).

const envPrefix = "ROBONET_"

// settings are the resolved values robonode runs with.
type settings struct {
	Name            string
	DataDir         string
	Bind            string
	GRPC            string
	HTTP            string
	Postgres        string
	Capabilities    map[string]int // nil: node.DefaultCapabilities()
	Join            []string
	Advertise       string
	Server          *bool // nil: a server unless Join is set
	BootstrapExpect int   // 0: 1 on servers
	Partitions      int   // 0: not given (a new mesh gets mesh.DefaultPartitions)
	// Placement is how this server places partitions when it leads.
	Placement       mesh.PartitionPlacement
	Gossip          string
	Raft            string
	GossipKey       []byte
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration
	// HeartbeatInterval and MissedHeartbeats set the heartbeat ladder of
	// the node's workers and Wagglers.
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	EnableDebug       bool      // /debug/pprof/ on the HTTP listener
	CPUProfile        string    // file to write a CPU profile of the process's life to
	TLS               pki.Files // the node's certificate, key and the mesh CA
	APITokenFile      string    // --api-token-file
	Insecure          bool
	DispatchTier      string               // the trust tier a worker node needs for all its slots
	TrustPeers        []string             // nodes trusted from the start ("*": all)
	Limits            []func(*node.Config) // from --limit, in order
	ExecAllow         []string             // the exec policy: paths and globs, "*" or "none"; nil: none given
	ExecUser          string               // the user exec'd programs run as ("": the node's)

	// WorkerBuiltins are the built-in actions worker programs may claim
	// (--allow-worker-builtins); WorkerMinRuntime is the floor of their
	// answers (--worker-min-runtime, 0: none).
	WorkerBuiltins   []string
	WorkerMinRuntime time.Duration
}

// flagNames lists the settings' flags, in the order of the table above.
var flagNames = []string{"name", "data-dir", "bind", "grpc", "http", "postgres", "capability",
	"join", "advertise", "server", "bootstrap-expect", "partitions", "partition-placement", "gossip", "raft", "gossip-key",
	"log-format", "log-level", "shutdown-timeout", "heartbeat-interval", "missed-heartbeats", "enable-debug", "cpu-profile", "tls-ca", "tls-cert", "tls-key", "api-token-file", "insecure", "dispatch-tier", "trust-peer", "allow-worker-builtins", "worker-min-runtime", "limit", "exec-allow", "exec-user"}

// listFlags are the repeatable flags: comma-separated in the environment,
// lists in the config file, and no default.
var listFlags = []string{"capability", "join", "trust-peer", "allow-worker-builtins", "limit", "exec-allow"}

// optionalFlags have no default value: unset means "decide from the other
// settings".
var optionalFlags = []string{"server", "partitions"}

// addServerFlags declares the flags of a server; their defaults are the
// settings' defaults.
func addServerFlags(fs *pflag.FlagSet) {
	fs.String("name", "", "node name in logs and worker ids: letters, digits, '.', '_', '-' (default: the host name)")
	fs.String("data-dir", node.DefaultDataDir, "directory of the node's durable files: SQLite database, term counter")
	fs.String("bind", "127.0.0.1", "IP address the listeners bind to when --grpc or --http give only a port")
	fs.String("grpc", "7233", "gRPC API listen address: host:port, or a port on --bind")
	fs.String("http", "7280", "HTTP (/healthz, /readyz) listen address: host:port, a port on --bind, or off")
	fs.String("postgres", "", "Postgres DSN; the engine's state goes there instead of SQLite in --data-dir")
	fs.StringArray("capability", nil, "capability served and its worker pool size, NAME=SIZE (repeatable; replaces the default set); none serves nothing")
	fs.StringArray("join", nil, "gossip address (host:port) of a node already in a mesh to join (repeatable); without it the node starts a mesh of its own")
	fs.String("advertise", "", "host (IP or name) other nodes reach this node at, for gossip, Raft and gRPC (default: the bound address)")
	fs.Bool("server", false, "run as a Raft server that may lead the engine (default: true without --join, false with it; a worker-only node opens no store)")
	fs.Int("bootstrap-expect", 0, "number of servers to wait for before the first Raft election; more than 1 needs --postgres (default 1 on servers)")
	fs.Int("partitions", mesh.DefaultPartitions, "partitions of a mesh this server creates, 1..1024 (fixed for the mesh's life; a server given a count the mesh was not created with refuses to start)")
	fs.String("partition-placement", "balanced", "how the leader places partitions: balanced (spread over the servers, each running the engine of its own) or leader (every partition on the Raft leader, one engine for the mesh); use the same on every server")
	fs.String("gossip", "7301", "gossip (memberlist) listen address: host:port, or a port on --bind; 0 picks a free port")
	fs.String("raft", "7302", "Raft listen address on servers: host:port, or a port on --bind; 0 picks a free port")
	fs.String("gossip-key", "", "base64 of a 16, 24 or 32 byte key that encrypts gossip; the same on every node")
	fs.String("log-format", "console", "log format: console or json")
	fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.Duration("shutdown-timeout", 30*time.Second, "how long a clean shutdown may take before work is cut")
	fs.Duration("heartbeat-interval", wag.DefaultHeartbeatInterval, "how often workers report each running attempt to its Waggler; use the same value on every node")
	fs.Int("missed-heartbeats", wag.DefaultMissedHeartbeats, "missed heartbeat intervals after which a Waggler declares a worker dead and moves its attempt")
	fs.String("tls-ca", "", "the mesh CA's certificate (PEM): with --tls-cert and --tls-key, every connection between nodes is mutual TLS and the API is served over TLS")
	fs.String("tls-cert", "", "this node's certificate (PEM), naming it (robonode tls cert create --name NAME)")
	fs.String("tls-key", "", "this node's private key (PEM)")
	fs.String("api-token-file", "", "file of API tokens, a line each: TOKEN name=NAME role=read|submit|operate|admin|worker [workflows=GLOB,…] [capabilities=GLOB,…] (# comments allowed); re-read when it changes or on SIGHUP")
	fs.Bool("insecure", false, "allow listening beyond loopback without TLS, API tokens or a gossip key (anyone who reaches the node could run commands)")
	fs.String("dispatch-tier", "established", "trust tier a worker node needs to run all its slots: unverified, provisional, established or trusted; below it a node is on probation (one attempt at a time, one more per attempt it completes)")
	fs.StringArray("trust-peer", nil, "node trusted from the start, by name (repeatable); * trusts every node. Worker programs are judged apart: NODE/PROGRAM, NODE/* (a node's programs) or */* (every program). One that forges a hash-chain token or misbehaves loses this trust")
	fs.StringArray("allow-worker-builtins", nil, "built-in action a worker program connected to this node may claim as its own: exec, http, sleep, echo, or * for all (repeatable); by default none may")
	fs.Duration("worker-min-runtime", node.DefaultWorkerMinRuntime, "a worker program's answer sooner than this after the node sent the attempt is counted as misbehaviour (against its trust); raise it to what your capability's work takes at least; 0: no floor")
	fs.Bool("enable-debug", false, "serve Go's profiler at /debug/pprof/ on the HTTP listener (keep --http on a trusted interface)")
	fs.String("cpu-profile", "", "write a CPU profile of the node's whole run to this file, finished at a clean shutdown (go tool pprof FILE)")
	fs.StringArray("limit", nil, "raise or lower a limit on client input, NAME=VALUE (repeatable), e.g. spec-bytes=2MiB; docs/limits.md lists them: "+limitNames())
	fs.StringArray("exec-allow", nil, "program the exec action may run here, by absolute path or glob (repeatable), e.g. /usr/bin/curl or '/opt/tools/*'; "+
		"a bare name in a task is looked up in PATH first; * allows any program, none none. Without it a node on loopback runs any program and a node that listens beyond loopback none")
	fs.String("exec-user", "", "run exec'd programs as this user (name or uid), with its groups and home; the node must run as root")
	fs.String("config", "", "YAML or JSON config file (env ROBONET_CONFIG)")
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// usageError is a configuration the user must fix: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// resolve reads every setting from flags, environment, config file and
// defaults, in that order of precedence. getenv is os.Getenv outside tests.
func resolve(fs *pflag.FlagSet, getenv func(string) string) (settings, error) {
	file, err := loadConfigFile(fs, getenv)
	if err != nil {
		return settings{}, err
	}
	raw := map[string][]string{}
	for _, name := range flagNames {
		f := fs.Lookup(name)
		switch {
		case f.Changed:
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				raw[name] = sv.GetSlice()
			} else {
				raw[name] = []string{f.Value.String()}
			}
		case getenv(envName(name)) != "":
			v := getenv(envName(name))
			if slices.Contains(listFlags, name) {
				raw[name] = splitList(v)
			} else {
				raw[name] = []string{v}
			}
		case file[name] != nil:
			raw[name] = file[name]
		case !slices.Contains(listFlags, name) && !slices.Contains(optionalFlags, name):
			raw[name] = []string{f.DefValue}
		}
	}
	one := func(name string) string { return raw[name][0] }

	s := settings{
		Name: one("name"), DataDir: one("data-dir"), Bind: one("bind"), Postgres: one("postgres"),
		LogFormat: strings.ToLower(one("log-format")), LogLevel: strings.ToLower(one("log-level")),
	}
	var errs []error
	if net.ParseIP(s.Bind) == nil && s.Bind != "localhost" {
		errs = append(errs, fmt.Errorf("bind %q: want an IP address", s.Bind))
	}
	if s.GRPC, err = listenAddr(one("grpc"), s.Bind, false); err != nil {
		errs = append(errs, fmt.Errorf("grpc: %w", err))
	}
	if s.HTTP, err = listenAddr(one("http"), s.Bind, true); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	if caps, ok := raw["capability"]; ok {
		if s.Capabilities, err = parseCapabilities(caps); err != nil {
			errs = append(errs, err)
		}
	}
	if ls, ok := raw["limit"]; ok {
		if s.Limits, err = parseLimits(ls); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.resolveMesh(raw, one); err != nil {
		errs = append(errs, err)
	}
	if s.LogFormat != "console" && s.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format %q: want console or json", s.LogFormat))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, s.LogLevel) {
		errs = append(errs, fmt.Errorf("log-level %q: want debug, info, warn or error", s.LogLevel))
	}
	if s.ShutdownTimeout, err = time.ParseDuration(one("shutdown-timeout")); err != nil || s.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout %q: want a positive duration such as 30s", one("shutdown-timeout")))
	}
	if s.HeartbeatInterval, err = time.ParseDuration(one("heartbeat-interval")); err != nil || s.HeartbeatInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("heartbeat-interval %q: want a duration of at least 1ms, such as 5s", one("heartbeat-interval")))
	}
	if s.MissedHeartbeats, err = strconv.Atoi(one("missed-heartbeats")); err != nil || s.MissedHeartbeats < 1 || s.MissedHeartbeats > 100 {
		errs = append(errs, fmt.Errorf("missed-heartbeats %q: want a number 1..100", one("missed-heartbeats")))
	}
	if s.EnableDebug, err = strconv.ParseBool(one("enable-debug")); err != nil {
		errs = append(errs, fmt.Errorf("enable-debug %q: want true or false", one("enable-debug")))
	}
	s.CPUProfile = one("cpu-profile")
	if s.Insecure, err = strconv.ParseBool(one("insecure")); err != nil {
		errs = append(errs, fmt.Errorf("insecure %q: want true or false", one("insecure")))
	}
	s.DispatchTier = one("dispatch-tier")
	if _, err := trust.ParseTier(s.DispatchTier); err != nil {
		errs = append(errs, fmt.Errorf("dispatch-tier %q: want unverified, provisional, established or trusted", s.DispatchTier))
	}
	for _, p := range raw["trust-peer"] {
		if p = strings.TrimSpace(p); p == "" || len(p) > 256 {
			errs = append(errs, fmt.Errorf("trust-peer %q: name a node (or * for every node), NODE/PROGRAM, NODE/* or */* for worker programs", p))
			continue
		}
		s.TrustPeers = append(s.TrustPeers, p)
	}
	for _, a := range raw["allow-worker-builtins"] {
		if a = strings.TrimSpace(a); a != "*" && !slices.Contains(wag.BuiltinActions(), a) {
			errs = append(errs, fmt.Errorf("allow-worker-builtins %q: name a built-in action (%s) or *", a, strings.Join(wag.BuiltinActions(), ", ")))
			continue
		}
		s.WorkerBuiltins = append(s.WorkerBuiltins, a)
	}
	if s.WorkerMinRuntime, err = time.ParseDuration(one("worker-min-runtime")); err != nil || s.WorkerMinRuntime < 0 {
		errs = append(errs, fmt.Errorf("worker-min-runtime %q: want a duration such as 1ms, or 0 for no floor", one("worker-min-runtime")))
	}
	s.TLS = pki.Files{CA: one("tls-ca"), Cert: one("tls-cert"), Key: one("tls-key")}
	if s.TLS.Set() && (s.TLS.CA == "" || s.TLS.Cert == "" || s.TLS.Key == "") {
		errs = append(errs, errors.New("tls: --tls-ca, --tls-cert and --tls-key go together (robonode tls --help)"))
	}
	if f := one("api-token-file"); f != "" {
		// The node reads it (and re-reads it when it changes); an error
		// in it is the node's configuration error, with file and line.
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("api-token-file: %w", err))
		}
		s.APITokenFile = f
	}
	s.ExecAllow, s.ExecUser = raw["exec-allow"], one("exec-user")
	if err := (wag.ExecPolicy{Allow: s.ExecAllow, User: s.ExecUser}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return settings{}, usageError{errors.Join(errs...)}
	}
	return s, nil
}

// resolveMesh reads the mesh settings: --join, --advertise, --server,
// --bootstrap-expect, --partitions, --gossip, --raft and --gossip-key.
func (s *settings) resolveMesh(raw map[string][]string, one func(string) string) error {
	var errs []error
	for _, j := range raw["join"] {
		if _, port, err := net.SplitHostPort(j); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("join %q: want host:port of a node's gossip address, e.g. 10.0.0.1:7301", j))
			continue
		}
		s.Join = append(s.Join, j)
	}
	s.Advertise = one("advertise")
	if s.Advertise != "" && strings.Contains(s.Advertise, ":") && net.ParseIP(s.Advertise) == nil {
		errs = append(errs, fmt.Errorf("advertise %q: want a host (IP address or name) without a port", s.Advertise))
	}
	if v, ok := raw["server"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("server %q: want true or false", v[0]))
		}
		s.Server = &b
	}
	var err error
	if s.BootstrapExpect, err = strconv.Atoi(one("bootstrap-expect")); err != nil || s.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %q: want a number of servers, at least 1", one("bootstrap-expect")))
	}
	if v, ok := raw["partitions"]; ok {
		if s.Partitions, err = strconv.Atoi(v[0]); err != nil || s.Partitions < 1 || s.Partitions > mesh.MaxPartitions {
			errs = append(errs, fmt.Errorf("partitions %q: want a number of partitions, 1..%d (default %d)", v[0], mesh.MaxPartitions, mesh.DefaultPartitions))
		}
	}
	switch v := one("partition-placement"); v {
	case "balanced":
		s.Placement = mesh.PlaceBalanced
	case "leader":
		s.Placement = mesh.PlaceOnLeader
	default:
		errs = append(errs, fmt.Errorf("partition-placement %q: want balanced or leader", v))
	}
	if s.Gossip, err = listenAddr(one("gossip"), s.Bind, false); err != nil {
		errs = append(errs, fmt.Errorf("gossip: %w", err))
	}
	if s.Raft, err = listenAddr(one("raft"), s.Bind, false); err != nil {
		errs = append(errs, fmt.Errorf("raft: %w", err))
	}
	if k := one("gossip-key"); k != "" {
		key, err := base64.StdEncoding.DecodeString(k)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("gossip-key: not base64: %w", err))
		case len(key) != 16 && len(key) != 24 && len(key) != 32:
			errs = append(errs, fmt.Errorf("gossip-key: %d bytes; want 16, 24 or 32 (e.g. head -c 32 /dev/urandom | base64)", len(key)))
		default:
			s.GossipKey = key
		}
	}
	return errors.Join(errs...)
}

// listenAddr reads a listen address: host:port as it is, a bare port (or
// ":port") on the bind address, or "off" where allowed.
func listenAddr(v, bind string, offOK bool) (string, error) {
	if offOK && strings.EqualFold(v, node.HTTPDisabled) {
		return node.HTTPDisabled, nil
	}
	if port, err := strconv.ParseUint(strings.TrimPrefix(v, ":"), 10, 16); err == nil {
		return net.JoinHostPort(bind, strconv.FormatUint(port, 10)), nil
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("%q: want host:port or a port", v)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("%q: bad port %q", v, port)
	}
	return net.JoinHostPort(host, port), nil
}

// parseCapabilities reads NAME=SIZE entries; a later entry for the same
// name wins. The single entry "none" serves no capability at all: a server
// that runs no tasks, leaving them to worker nodes.
func parseCapabilities(entries []string) (map[string]int, error) {
	caps := make(map[string]int, len(entries))
	if len(entries) == 1 && strings.TrimSpace(entries[0]) == "none" {
		return caps, nil
	}
	var errs []error
	for _, e := range entries {
		name, size, ok := strings.Cut(strings.TrimSpace(e), "=")
		n, err := strconv.Atoi(size)
		if !ok || name == "" || err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("capability %q: want NAME=SIZE with a size of at least 1, e.g. code.exec=8 (or the single value none)", e))
			continue
		}
		caps[name] = n
	}
	return caps, errors.Join(errs...)
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// loadConfigFile reads the config file named by --config or
// ROBONET_CONFIG, if any, into flag name → values.
func loadConfigFile(fs *pflag.FlagSet, getenv func(string) string) (map[string][]string, error) {
	path := getenv(envName("config"))
	if f := fs.Lookup("config"); f.Changed {
		path = f.Value.String()
	}
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("config file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, usagef("config file %s: %w", path, err)
	}
	out := make(map[string][]string, len(doc))
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, key := range keys {
		name := strings.ReplaceAll(key, "_", "-")
		switch name {
		case "capabilities":
			name = "capability"
		case "limits":
			name = "limit"
		}
		if !slices.Contains(flagNames, name) {
			errs = append(errs, fmt.Errorf("unknown key %q (known: %s)", key, knownKeys()))
			continue
		}
		vals, err := fileValues(name, doc[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		out[name] = vals
	}
	if len(errs) > 0 {
		return nil, usageError{fmt.Errorf("config file %s: %w", path, errors.Join(errs...))}
	}
	return out, nil
}

// fileValues turns a config file value into flag-style strings.
func fileValues(name string, v any) ([]string, error) {
	if want, ok := map[string]string{"join": "host:port", "exec-allow": "program paths or globs"}[name]; ok {
		switch v := v.(type) {
		case string:
			return splitList(v), nil
		case []any:
			out := make([]string, 0, len(v))
			for _, e := range v {
				out = append(out, fmt.Sprint(e))
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a list of %s", want)
	}
	if name == "capability" || name == "limit" {
		switch v := v.(type) {
		case map[string]any:
			out := make([]string, 0, len(v))
			for k, size := range v {
				out = append(out, fmt.Sprintf("%s=%v", k, size))
			}
			sort.Strings(out)
			return out, nil
		case []any:
			out := make([]string, 0, len(v))
			for _, e := range v {
				out = append(out, fmt.Sprint(e))
			}
			return out, nil
		}
		return nil, errors.New("want a map of NAME: VALUE or a list of NAME=VALUE")
	}
	switch v.(type) {
	case string, int, float64, bool:
		return []string{fmt.Sprint(v)}, nil
	}
	return nil, fmt.Errorf("want a single value, got %T", v)
}

func knownKeys() string {
	keys := make([]string, len(flagNames))
	for i, n := range flagNames {
		keys[i] = strings.ReplaceAll(n, "-", "_")
	}
	return strings.Join(keys, ", ")
}
