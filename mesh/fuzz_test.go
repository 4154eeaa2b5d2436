package mesh

import (
	"testing"
)

// FuzzDecodeNodeMeta: whatever metadata a peer gossips, decoding never
// panics, and what it accepts is metadata an honest node could send: it
// encodes again within the limit.
func FuzzDecodeNodeMeta(f *testing.F) {
	for _, m := range []NodeMeta{
		{Name: "w1", Roles: []Role{RoleWorker}, Capabilities: map[string]int{"code.exec": 8}, GRPCAddr: "10.0.0.4:7233", Version: "v1"},
		{Name: "s1", Roles: []Role{RoleServer, RoleWorker}, RaftAddr: "10.0.0.1:7302", Wagglers: map[string]uint64{"core": 3}},
	} {
		b, err := m.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"n":"x","r":["god"]}`))
	f.Add([]byte(`{"v":1,"n":"x","c":{"a":-5}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > MetaLimit {
			return // memberlist refuses it before the mesh sees it
		}
		m, st, err := decodeWire(b)
		if err != nil {
			return
		}
		for c, n := range m.Capabilities {
			if n < 0 || n > maxPoolSize {
				t.Fatalf("accepted capability %q with %d slots", c, n)
			}
		}
		for _, r := range m.Roles {
			if r != RoleServer && r != RoleWorker {
				t.Fatalf("accepted role %q", r)
			}
		}
		_ = st
	})
}
