package pki

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// mesh creates a CA in a temporary directory with certificates for the
// given nodes (names starting with "s" are servers).
func mesh(t *testing.T, nodes ...string) (dir string, ids map[string]*Identity) {
	t.Helper()
	dir = t.TempDir()
	if _, _, err := CreateCA(dir, 24*time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	ids = map[string]*Identity{}
	for _, n := range nodes {
		cert, key, err := CreateNodeCert(dir, dir, NodeCert{Name: n, Server: strings.HasPrefix(n, "s"), Validity: time.Hour}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		id, err := Load(Files{CA: dir + "/" + CAFile, Cert: cert, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	return dir, ids
}

// handshake runs a TLS handshake between a client and a server config on
// loopback and returns both errors and the server's view of the client.
func handshake(t *testing.T, client, server *tls.Config) (peer tls.ConnectionState, clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			serverErr = err
			return
		}
		defer c.Close()
		sc := tls.Server(c, server)
		serverErr = sc.Handshake()
		peer = sc.ConnectionState()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := tls.Client(c, client)
	clientErr = cc.Handshake()
	if clientErr == nil {
		// TLS 1.3: the server verifies the client's certificate after the
		// client's handshake returns; a read sees its verdict.
		_ = cc.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = cc.Read(make([]byte, 1))
	}
	_ = cc.Close()
	<-done
	return peer, clientErr, serverErr
}

func TestNodeToNode(t *testing.T) {
	_, ids := mesh(t, "s1", "w1")
	peer, cerr, serr := handshake(t, ids["w1"].ClientTLS("s1"), ids["s1"].ServerTLS())
	if cerr != nil || serr != nil {
		t.Fatalf("w1 → s1: client %v, server %v", cerr, serr)
	}
	if name, server, ok := PeerNode(peer); !ok || name != "w1" || server {
		t.Fatalf("s1 sees %q server=%v ok=%v, want w1, a worker", name, server, ok)
	}
	if id := ids["s1"]; id.Name != "s1" || !id.Server || ids["w1"].Server {
		t.Fatalf("identities: %+v %+v", id, ids["w1"])
	}

	// Dialling s1 while expecting w9: refused by the client.
	_, cerr, _ = handshake(t, ids["w1"].ClientTLS("w9"), ids["s1"].ServerTLS())
	if !errors.Is(cerr, ErrWrongNode) {
		t.Fatalf("dialling s1 as w9: %v, want ErrWrongNode", cerr)
	}
}

func TestClientsWithoutCertificates(t *testing.T) {
	dir, ids := mesh(t, "s1")
	cfg, err := ClientTLS(dir+"/"+CAFile, "")
	if err != nil {
		t.Fatal(err)
	}
	peer, cerr, serr := handshake(t, cfg, ids["s1"].ServerTLS())
	if cerr != nil || serr != nil {
		t.Fatalf("client → s1: client %v, server %v", cerr, serr)
	}
	if _, _, ok := PeerNode(peer); ok {
		t.Fatal("a client without a certificate was read as a node")
	}
	named, _ := ClientTLS(dir+"/"+CAFile, "s2")
	if _, cerr, _ := handshake(t, named, ids["s1"].ServerTLS()); !errors.Is(cerr, ErrWrongNode) {
		t.Fatalf("expecting s2, reaching s1: %v, want ErrWrongNode", cerr)
	}
}

// A certificate of another CA is refused both ways.
func TestForeignCA(t *testing.T) {
	_, ours := mesh(t, "s1")
	_, theirs := mesh(t, "s1", "w1")
	if _, cerr, _ := handshake(t, theirs["w1"].ClientTLS("s1"), ours["s1"].ServerTLS()); cerr == nil {
		// The client rejects our server (signed by another CA) first.
		t.Fatal("a node of another mesh connected")
	}
	if _, _, serr := handshake(t, theirs["w1"].ClientTLS(""), ours["s1"].ServerTLS()); serr == nil {
		t.Fatal("our server accepted a client certificate of another CA")
	}
}

// Only servers join Raft.
func TestRaftOnlyServers(t *testing.T) {
	_, ids := mesh(t, "s1", "s2", "w1")
	if _, cerr, serr := handshake(t, ids["s2"].RaftClientTLS(), ids["s1"].RaftServerTLS()); cerr != nil || serr != nil {
		t.Fatalf("s2 → s1 raft: client %v, server %v", cerr, serr)
	}
	if _, _, serr := handshake(t, ids["w1"].RaftClientTLS(), ids["s1"].RaftServerTLS()); !errors.Is(serr, ErrNotServer) {
		t.Fatalf("w1 → s1 raft: server %v, want ErrNotServer", serr)
	}
	if _, cerr, _ := handshake(t, ids["s1"].RaftClientTLS(), ids["w1"].RaftServerTLS()); !errors.Is(cerr, ErrNotServer) {
		t.Fatalf("s1 → w1 raft: client %v, want ErrNotServer", cerr)
	}
}

func TestCreateAndLoadErrors(t *testing.T) {
	dir, _ := mesh(t)
	if _, _, err := CreateCA(dir, time.Hour, now); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second CA in one directory: %v", err)
	}
	if _, _, err := CreateNodeCert(dir, dir, NodeCert{Name: "bad name", Validity: time.Hour}, now); err == nil {
		t.Fatal("a name with a space was accepted")
	}
	if _, _, err := CreateNodeCert(t.TempDir(), dir, NodeCert{Name: "w1", Validity: time.Hour}, now); err == nil || !strings.Contains(err.Error(), "robonode tls ca create") {
		t.Fatalf("no CA: %v", err)
	}
	if _, err := Load(Files{CA: dir + "/" + CAFile}); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("incomplete files: %v", err)
	}
	other, _ := mesh(t, "w1")
	cert, key := NodeFiles(other, "w1")
	if _, err := Load(Files{CA: dir + "/" + CAFile, Cert: cert, Key: key}); !errors.Is(err, ErrNotSigned) {
		t.Fatalf("a certificate of another CA: %v, want ErrNotSigned", err)
	}
	if _, err := LoadPool(cert + ".missing"); err == nil {
		t.Fatal("a missing CA file loaded")
	}
}
