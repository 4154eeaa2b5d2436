package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/robonet/robonet/trust"
)

// ControlState is the small state every server agrees on through Raft.
type ControlState struct {
	// Wagglers maps a capability to the node holding its Waggler role.
	Wagglers map[string]WagglerAssignment `json:"wagglers"`
	// Quarantine maps a node name to why and since when it is quarantined.
	Quarantine map[string]QuarantineEntry `json:"quarantine"`
	// Settings are cluster-wide key/value settings.
	Settings map[string]string `json:"settings"`
	// Anchors are the HCTH hash-chain anchors the nodes published
	// (trust.Anchor.Encode), registered by the leader from their gossip
	// metadata: a node's chain outlives a gossip view that lost it.
	Anchors map[string][]byte `json:"anchors,omitempty"`
	// PartitionCount is the engine's number of partitions, set once when
	// the mesh is created and never changed; 0 until it is set (see
	// SetPartitionCount).
	PartitionCount int `json:"partition_count,omitempty"`
	// Partitions maps a partition (0 ≤ p < PartitionCount) to its owner
	// server; a partition not in the map has none yet.
	Partitions map[int]PartitionAssignment `json:"partitions,omitempty"`
}

// PartitionAssignment is one partition's owner. Epoch only grows, and is
// above every Raft term and every epoch the partition had before (see
// planPartitions): the owner's engine fences the partition's writes with
// it.
type PartitionAssignment struct {
	Node  string `json:"node"`
	Epoch uint64 `json:"epoch"`
	// Term is the Raft term of the leader that made the assignment.
	Term uint64 `json:"term"`
	// At is when the leader made it (the proposer's clock).
	At time.Time `json:"at"`
	// Reason says why the partition went to Node.
	Reason string `json:"reason"`
}

// WagglerAssignment is one capability's Waggler and the epoch of the
// assignment; epochs only grow. Node is empty once the role was removed
// (no node serves the capability): the epoch stays, so the next
// assignment's is higher.
type WagglerAssignment struct {
	Node  string `json:"node"`
	Epoch uint64 `json:"epoch"`
}

// QuarantineEntry is one quarantined node.
type QuarantineEntry struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"` // supplied by the proposer, never by Apply
	// Manual marks an operator's quarantine: only an operator releases it
	// (the Sentinel's are released after a cool-down).
	Manual bool `json:"manual,omitempty"`
}

func newControlState() ControlState {
	return ControlState{
		Wagglers:   map[string]WagglerAssignment{},
		Quarantine: map[string]QuarantineEntry{},
		Settings:   map[string]string{},
		Anchors:    map[string][]byte{},
		Partitions: map[int]PartitionAssignment{},
	}
}

// clone returns a deep copy (the values are plain structs).
func (s ControlState) clone() ControlState {
	c := ControlState{
		Wagglers:   maps.Clone(s.Wagglers),
		Quarantine: maps.Clone(s.Quarantine),
		Settings:   maps.Clone(s.Settings),
		Anchors:    maps.Clone(s.Anchors), // values are never changed in place

		PartitionCount: s.PartitionCount,
		Partitions:     maps.Clone(s.Partitions),
	}
	if c.Wagglers == nil {
		c.Wagglers = map[string]WagglerAssignment{}
	}
	if c.Quarantine == nil {
		c.Quarantine = map[string]QuarantineEntry{}
	}
	if c.Settings == nil {
		c.Settings = map[string]string{}
	}
	if c.Anchors == nil {
		c.Anchors = map[string][]byte{}
	}
	if c.Partitions == nil {
		c.Partitions = map[int]PartitionAssignment{}
	}
	return c
}

// CommandType tags a replicated command; it is the first byte of the log
// entry. Values are never reused. A node that meets a type it does not know
// (a newer node's command, during a rolling upgrade) ignores the entry only
// if the type carries IgnoreUnknown — a command whose absence cannot make
// the nodes' control states disagree in a way that matters. Any other
// unknown command stops the node (see fsm.Apply): applying the rest of the
// log without it would let its control state silently diverge.
type CommandType uint8

// IgnoreUnknown, set in a command type, lets a node that does not know the
// type skip the entry (the scheme of Nomad's IgnoreUnknownTypeFlag).
const IgnoreUnknown CommandType = 0x80

// Command types. 0 is reserved (never a valid command).
const (
	CmdAssignWaggler   CommandType = 1
	CmdQuarantine      CommandType = 2
	CmdRelease         CommandType = 3
	CmdSetSetting      CommandType = 4
	CmdUnassignWaggler CommandType = 5
	// CmdRegisterAnchor may be skipped by an older node: anchors only
	// help receivers verify stamps.
	CmdRegisterAnchor CommandType = 6 | IgnoreUnknown
	// Partition commands may not be skipped: servers that disagree about
	// the count or the owners would run partitions twice or not at all.
	CmdSetPartitionCount CommandType = 7
	CmdAssignPartitions  CommandType = 8
)

// Command is one change to the control state, built by the constructors
// below and replicated by Mesh.Apply.
type Command struct {
	typ  CommandType
	body []byte
}

// Type returns the command's type tag.
func (c Command) Type() CommandType { return c.typ }

// describe renders a command for logs: its type and body.
func (c Command) describe() string {
	names := map[CommandType]string{CmdAssignWaggler: "assign-waggler", CmdQuarantine: "quarantine",
		CmdRelease: "release", CmdSetSetting: "set-setting", CmdUnassignWaggler: "unassign-waggler", CmdRegisterAnchor: "register-anchor",
		CmdSetPartitionCount: "set-partition-count", CmdAssignPartitions: "assign-partitions"}
	name, ok := names[c.typ]
	if !ok {
		name = fmt.Sprintf("type-%d", c.typ)
	}
	return name + " " + string(c.body)
}

// Encode returns the log entry: the type byte, then a JSON body.
func (c Command) Encode() []byte {
	b := make([]byte, 0, 1+len(c.body))
	return append(append(b, byte(c.typ)), c.body...)
}

type assignWagglerBody struct {
	Capability string `json:"capability"`
	Node       string `json:"node"`
	Epoch      uint64 `json:"epoch"`
}

type unassignWagglerBody struct {
	Capability string `json:"capability"`
	Epoch      uint64 `json:"epoch"` // the assignment's: a newer one is left alone
}

type quarantineBody struct {
	Node   string    `json:"node"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Manual bool      `json:"manual,omitempty"`
}

type releaseBody struct {
	Node string `json:"node"`
}

type anchorBody struct {
	Node   string `json:"node"`
	Anchor []byte `json:"anchor"`
}

type settingBody struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type partitionCountBody struct {
	Count int `json:"count"`
}

// PartitionMove assigns one partition: the body of AssignPartitions, and
// what planPartitions returns.
type PartitionMove struct {
	Partition int    `json:"partition"`
	Node      string `json:"node"`
	Epoch     uint64 `json:"epoch"`
	// Term is the Raft term of the leader that proposes the move.
	Term   uint64    `json:"term"`
	At     time.Time `json:"at"` // the proposer's clock
	Reason string    `json:"reason"`
}

type assignPartitionsBody struct {
	Moves []PartitionMove `json:"moves"`
}

func newCommand(t CommandType, body any) Command {
	b, err := json.Marshal(body)
	if err != nil { // the bodies are plain structs of strings, numbers and times
		panic(fmt.Sprintf("mesh: encoding command %d: %v", t, err))
	}
	return Command{typ: t, body: b}
}

// AssignWaggler makes node the Waggler of capability at epoch, which must be
// greater than the capability's current epoch (or Apply fails with
// ErrStaleEpoch).
func AssignWaggler(capability, node string, epoch uint64) Command {
	return newCommand(CmdAssignWaggler, assignWagglerBody{Capability: capability, Node: node, Epoch: epoch})
}

// UnassignWaggler removes the Waggler role of capability if it is still at
// epoch (no node serves the capability any more); the epoch is kept.
func UnassignWaggler(capability string, epoch uint64) Command {
	return newCommand(CmdUnassignWaggler, unassignWagglerBody{Capability: capability, Epoch: epoch})
}

// Quarantine puts node in quarantine since at (the proposer's clock: the
// state machine never reads one); manual marks an operator's. Quarantining
// a quarantined node keeps its original time, updates the reason, and
// keeps it manual if either is.
func Quarantine(node, reason string, at time.Time, manual bool) Command {
	return newCommand(CmdQuarantine, quarantineBody{Node: node, Reason: reason, At: at.UTC().Round(0), Manual: manual})
}

// Release takes node out of quarantine (a no-op if it is not in it).
func Release(node string) Command {
	return newCommand(CmdRelease, releaseBody{Node: node})
}

// RegisterAnchor records node's published hash-chain anchor (44 bytes,
// trust.Anchor.Encode), replacing the one it had (it restarted, or its
// chain ran out).
func RegisterAnchor(node string, anchor []byte) Command {
	return newCommand(CmdRegisterAnchor, anchorBody{Node: node, Anchor: anchor})
}

// SetPartitionCount sets the number of partitions, 1..MaxPartitions. It
// applies only while the count is not set (0): afterwards Apply refuses it
// with ErrPartitionCountSet, whatever the count.
func SetPartitionCount(n int) Command {
	return newCommand(CmdSetPartitionCount, partitionCountBody{Count: n})
}

// AssignPartitions assigns partitions to servers, all or none: Apply
// refuses the whole batch (ErrInvalidCommand) when the count is not set,
// a partition is outside 0..count-1 or appears twice, a node is empty or
// an epoch is not above its term, and (ErrStaleEpoch) when an epoch is
// not above the partition's current one.
func AssignPartitions(moves []PartitionMove) Command {
	b := assignPartitionsBody{Moves: make([]PartitionMove, len(moves))}
	for i, mv := range moves {
		mv.At = mv.At.UTC().Round(0)
		b.Moves[i] = mv
	}
	return newCommand(CmdAssignPartitions, b)
}

// SetSetting sets a cluster setting; an empty value deletes it.
func SetSetting(key, value string) Command {
	return newCommand(CmdSetSetting, settingBody{Key: key, Value: value})
}

// Errors returned by Apply for commands the state machine rejects. The
// rejection is deterministic: every server rejects the same entry the same
// way and the state does not change.
var (
	// ErrStaleEpoch rejects an AssignWaggler whose epoch is not greater
	// than the capability's current one, and an AssignPartitions with an
	// epoch not greater than its partition's.
	ErrStaleEpoch = errors.New("epoch not greater than the current one")
	// ErrPartitionCountSet rejects a SetPartitionCount once the count is
	// set: it never changes after the mesh is created.
	ErrPartitionCountSet = errors.New("partition count already set")
	// ErrUnknownCommand: a command of a type this node does not know and
	// may not skip (see IgnoreUnknown). Apply stops the node on it.
	ErrUnknownCommand = errors.New("unknown control command")
	// ErrInvalidCommand rejects a malformed command.
	ErrInvalidCommand = errors.New("invalid command")
)

// fsm is the control-state machine. Apply is deterministic: it reads only
// the log entry and the current state — no clock, randomness or I/O.
type fsm struct {
	log *zap.Logger

	mu    sync.RWMutex
	state ControlState

	unknown atomic.Uint64 // entries of unknown command types, ignored

	// changed is closed (and replaced) whenever the state changes.
	changedMu sync.Mutex
	changed   chan struct{}
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(log *zap.Logger) *fsm {
	return &fsm{log: log, state: newControlState(), changed: make(chan struct{})}
}

// Changed returns a channel closed at the next change of the state.
func (f *fsm) Changed() <-chan struct{} {
	f.changedMu.Lock()
	defer f.changedMu.Unlock()
	return f.changed
}

func (f *fsm) notify() {
	f.changedMu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.changedMu.Unlock()
}

// Apply applies one committed entry. It returns nil or an error describing
// a deterministic rejection.
//
// A command of an unknown type without IgnoreUnknown stops the process:
// Raft needs every node to apply every entry, and a node that skipped one
// would go on with a control state the others do not have. Crashing (and
// crashing again on restart, at the same entry) until the node is
// upgraded is the safe outcome.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	err := f.apply(l.Index, l.Data)
	if err == nil {
		f.notify()
	}
	if errors.Is(err, ErrUnknownCommand) {
		f.log.Error("cannot apply a control command; stopping", zap.Error(err))
		panic(err.Error())
	}
	return err
}

func (f *fsm) apply(index uint64, data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty entry", ErrInvalidCommand)
	}
	typ, body := CommandType(data[0]), data[1:]
	f.mu.Lock()
	defer f.mu.Unlock()
	switch typ {
	case CmdAssignWaggler:
		var c assignWagglerBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: assign waggler: %w", ErrInvalidCommand, err)
		}
		if c.Capability == "" || c.Node == "" {
			return fmt.Errorf("%w: assign waggler needs a capability and a node", ErrInvalidCommand)
		}
		if cur, ok := f.state.Wagglers[c.Capability]; ok && c.Epoch <= cur.Epoch {
			return fmt.Errorf("%w: waggler %s is at epoch %d (held by %s), got %d",
				ErrStaleEpoch, c.Capability, cur.Epoch, cur.Node, c.Epoch)
		}
		f.state.Wagglers[c.Capability] = WagglerAssignment{Node: c.Node, Epoch: c.Epoch}
	case CmdUnassignWaggler:
		var c unassignWagglerBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: unassign waggler: %w", ErrInvalidCommand, err)
		}
		if cur, ok := f.state.Wagglers[c.Capability]; ok && cur.Epoch == c.Epoch {
			// Kept with no node, so that the next epoch is higher still.
			f.state.Wagglers[c.Capability] = WagglerAssignment{Epoch: c.Epoch}
		}
	case CmdQuarantine:
		var c quarantineBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: quarantine: %w", ErrInvalidCommand, err)
		}
		if c.Node == "" {
			return fmt.Errorf("%w: quarantine needs a node", ErrInvalidCommand)
		}
		e := QuarantineEntry{Reason: c.Reason, Since: c.At, Manual: c.Manual}
		if cur, ok := f.state.Quarantine[c.Node]; ok {
			e.Since, e.Manual = cur.Since, cur.Manual || c.Manual
		}
		f.state.Quarantine[c.Node] = e
	case CmdRelease:
		var c releaseBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: release: %w", ErrInvalidCommand, err)
		}
		delete(f.state.Quarantine, c.Node)
	case CmdRegisterAnchor:
		var c anchorBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: register anchor: %w", ErrInvalidCommand, err)
		}
		if c.Node == "" || len(c.Anchor) != trust.AnchorBytes {
			return fmt.Errorf("%w: register anchor needs a node and an anchor of %d bytes", ErrInvalidCommand, trust.AnchorBytes)
		}
		f.state.Anchors[c.Node] = c.Anchor
	case CmdSetSetting:
		var c settingBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: set setting: %w", ErrInvalidCommand, err)
		}
		if c.Key == "" {
			return fmt.Errorf("%w: setting needs a key", ErrInvalidCommand)
		}
		if c.Value == "" {
			delete(f.state.Settings, c.Key)
		} else {
			f.state.Settings[c.Key] = c.Value
		}
	case CmdSetPartitionCount:
		var c partitionCountBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: set partition count: %w", ErrInvalidCommand, err)
		}
		if c.Count < 1 || c.Count > MaxPartitions {
			return fmt.Errorf("%w: partition count %d outside 1..%d", ErrInvalidCommand, c.Count, MaxPartitions)
		}
		if f.state.PartitionCount != 0 {
			return fmt.Errorf("%w: the mesh has %d partitions, asked for %d", ErrPartitionCountSet, f.state.PartitionCount, c.Count)
		}
		f.state.PartitionCount = c.Count
	case CmdAssignPartitions:
		var c assignPartitionsBody
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("%w: assign partitions: %w", ErrInvalidCommand, err)
		}
		if err := checkPartitionMoves(f.state, c.Moves); err != nil {
			return err
		}
		for _, mv := range c.Moves {
			f.state.Partitions[mv.Partition] = PartitionAssignment{
				Node: mv.Node, Epoch: mv.Epoch, Term: mv.Term, At: mv.At, Reason: mv.Reason,
			}
		}
	default:
		if typ&IgnoreUnknown == 0 {
			return fmt.Errorf("%w: type %d at index %d comes from a newer version of robonode; upgrade this node",
				ErrUnknownCommand, typ, index)
		}
		// A newer version's command that says it may be skipped: this node
		// keeps applying the log; the command's effect is missing here
		// until the upgrade.
		f.unknown.Add(1)
		f.log.Warn("ignoring control command of unknown type",
			zap.Uint8("type", uint8(typ)), zap.Uint64("index", index))
	}
	return nil
}

// checkPartitionMoves refuses a batch of moves unless every one applies
// to state: AssignPartitions is all or nothing.
func checkPartitionMoves(state ControlState, moves []PartitionMove) error {
	if len(moves) == 0 {
		return fmt.Errorf("%w: assign partitions needs at least one move", ErrInvalidCommand)
	}
	if state.PartitionCount == 0 {
		return fmt.Errorf("%w: assign partitions before the partition count is set", ErrInvalidCommand)
	}
	seen := make(map[int]bool, len(moves))
	for _, mv := range moves {
		switch {
		case mv.Partition < 0 || mv.Partition >= state.PartitionCount:
			return fmt.Errorf("%w: partition %d outside 0..%d", ErrInvalidCommand, mv.Partition, state.PartitionCount-1)
		case seen[mv.Partition]:
			return fmt.Errorf("%w: partition %d moved twice in one batch", ErrInvalidCommand, mv.Partition)
		case mv.Node == "":
			return fmt.Errorf("%w: partition %d assigned to no node", ErrInvalidCommand, mv.Partition)
		case mv.Epoch <= mv.Term:
			return fmt.Errorf("%w: partition %d at epoch %d, not above term %d", ErrInvalidCommand, mv.Partition, mv.Epoch, mv.Term)
		}
		seen[mv.Partition] = true
		if cur := state.Partitions[mv.Partition]; mv.Epoch <= cur.Epoch {
			return fmt.Errorf("%w: partition %d is at epoch %d (owned by %s), got %d",
				ErrStaleEpoch, mv.Partition, cur.Epoch, cur.Node, mv.Epoch)
		}
	}
	return nil
}

// PartitionCount returns the partition count of the current state.
func (f *fsm) PartitionCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.PartitionCount
}

// State returns a copy of the current state.
func (f *fsm) State() ControlState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.clone()
}

// snapshotFormat wraps the state with a version, for later migrations.
type snapshotFormat struct {
	Version int          `json:"version"`
	State   ControlState `json:"state"`
}

const snapshotVersion = 1

// Snapshot captures the state; encoding happens in Persist, off the FSM
// lock. encoding/json sorts map keys, so equal states give equal bytes.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{state: f.State()}, nil
}

// Restore replaces the state with a snapshot.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	var s snapshotFormat
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("decoding control state snapshot: %w", err)
	}
	if s.Version != snapshotVersion {
		return fmt.Errorf("control state snapshot version %d not supported", s.Version)
	}
	st := s.State.clone()
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	f.notify()
	return nil
}

type fsmSnapshot struct{ state ControlState }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := json.Marshal(snapshotFormat{Version: snapshotVersion, State: s.state})
	if err == nil {
		_, err = sink.Write(b)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("writing control state snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
