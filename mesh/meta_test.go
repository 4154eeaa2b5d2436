package mesh

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMetaRoundTrip(t *testing.T) {
	t.Parallel()
	in := NodeMeta{
		Name: "n1", Roles: []Role{RoleServer, RoleWorker},
		Capabilities: map[string]int{"code.exec": 8, "ai.inference": 1},
		GRPCAddr:     "10.0.0.1:7300", RaftAddr: "10.0.0.1:7302", Version: "v0.5.0",
		TrustAnchor: []byte("0123456789abcdef0123456789abcdef0123456789ab"), // 44 bytes, as trust.Anchor.Encode
	}
	b, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeNodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	// Fields a newer version adds are ignored.
	withNew := strings.Replace(string(b), `{`, `{"zz":{"new":1},`, 1)
	if _, err := DecodeNodeMeta([]byte(withNew)); err != nil {
		t.Fatalf("decoding metadata with an unknown field: %v", err)
	}
	// The mesh's Raft status rides along without disturbing NodeMeta.
	st := raftStatus{HasState: true, Leader: true, Term: 7, Voter: true, Conf: 12, confKnown: true}
	n, gotSt, err := decodeWire(mustMarshal(in.wire(&st)))
	if err != nil || !reflect.DeepEqual(n, in) || gotSt != st {
		t.Fatalf("with status: %+v %+v %v", n, gotSt, err)
	}
	// A node of encoding version 1 advertises no configuration index: the
	// status says it is not known (rather than 0, no configuration yet).
	w := in.wire(&raftStatus{HasState: true, Term: 7})
	w.V = 1
	if _, gotSt, err := decodeWire(mustMarshal(w)); err != nil || gotSt.confKnown || gotSt.Conf != 0 {
		t.Fatalf("version 1 status: %+v %v, want the configuration index unknown", gotSt, err)
	}
	w.V = metaEncodingVersion
	if _, gotSt, err := decodeWire(mustMarshal(w)); err != nil || !gotSt.confKnown || gotSt.Conf != 0 {
		t.Fatalf("version %d status with no configuration: %+v %v, want index 0, known", metaEncodingVersion, gotSt, err)
	}
	if _, err := DecodeNodeMeta(nil); err == nil {
		t.Fatal("decoding empty metadata succeeded")
	}
}

func TestMetaSizeLimit(t *testing.T) {
	t.Parallel()
	caps := map[string]int{}
	for i := range 40 {
		caps["capability.number."+strconv.Itoa(i)] = i
	}
	big := NodeMeta{Name: "n1", Capabilities: caps}
	if _, err := big.Encode(); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("Encode of %d capabilities: %v, want ErrMetaTooLarge", len(caps), err)
	}
	cfg := TestConfig("n1")
	cfg.Meta = big
	if _, err := New(cfg); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("New with oversized metadata: %v, want ErrMetaTooLarge", err)
	}
	m, err := New(TestConfig("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.UpdateMeta(big); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("UpdateMeta with oversized metadata: %v, want ErrMetaTooLarge", err)
	}
	if err := m.Halt(); err != nil { // never started: a no-op
		t.Fatal(err)
	}
	// Anything Encode accepts can be advertised with the largest status.
	for n := 0; n < 40; n++ {
		caps := map[string]int{}
		for i := range n {
			caps["cap."+strconv.Itoa(i)] = 1000 + i
		}
		meta := NodeMeta{Name: "node-with-a-long-name", Roles: []Role{RoleServer}, Capabilities: caps, RaftAddr: "255.255.255.255:65535"}
		if _, err := meta.Encode(); err != nil {
			continue
		}
		if b := mustMarshal(meta.wire(&worstStatus)); len(b) > MetaLimit {
			t.Fatalf("%d capabilities: accepted but %d bytes with status", n, len(b))
		}
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	c := Config{Name: "n"}.WithDefaults()
	if c.JoinTimeout != DefaultJoinTimeout || c.ServerStabilization != DefaultServerStabilization ||
		c.DeadServerGrace != DefaultDeadServerGrace || c.Logger == nil || c.Meta.Name != "n" {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Config{
		{},                            // no name
		{Name: "n", BindAddr: "host"}, // not an IP
		{Name: "n", GossipKey: []byte("short")},
		{Name: "n", BootstrapExpect: 3}, // not a server
		{Name: "n", BindPort: 70000},
		{Name: "n", JoinTimeout: -time.Second},
	}
	for i, b := range bad {
		if _, err := New(b); err == nil {
			t.Errorf("config %d (%+v) accepted", i, b)
		}
	}
}

// Metadata no honest node advertises is refused on decoding: a node so
// advertised is listed without roles or capabilities.
func TestMetaRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, json, says string }{
		{"unknown role", `{"v":1,"n":"x","r":["king"]}`, "unknown role"},
		{"pool size", `{"v":1,"n":"x","c":{"c":-1}}`, "slots"},
		{"empty capability's Waggler", `{"v":1,"n":"x","w":{"":3}}`, "empty capability"},
		{"short anchor", `{"v":1,"n":"x","t":"AQID"}`, "anchor of 3 bytes, not 44"},
	} {
		if _, err := DecodeNodeMeta([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.says)
		}
	}
}
