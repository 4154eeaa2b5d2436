package storeutil

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// FuzzPageToken fuzzes both directions of the ListInstances page token.
//
// token is what a client may send back: the empty token is the first page;
// anything else either fails with an error wrapping ErrInvalidPageToken or
// decodes to a UTC microsecond key whose re-encoding decodes to the same key
// and re-encodes to the same token.
//
// micros, hi and lo make a key a store may produce (any microsecond
// instant, any ID): its token is URL-safe and not empty, decodes to the same
// key, and every prefix of it decodes to an error or a key, never a panic.
func FuzzPageToken(f *testing.F) {
	id := uuid.MustParse("0190f5a4-7b1e-7c3d-9a2b-1c2d3e4f5a6b")
	b64 := base64.RawURLEncoding.EncodeToString
	var tokens []string
	for _, k := range []PageKey{
		{CreatedAt: time.UnixMicro(1_700_000_000_123_456).UTC(), ID: id},
		{CreatedAt: time.UnixMicro(0).UTC(), ID: uuid.Nil},
		{CreatedAt: time.UnixMicro(-1).UTC(), ID: uuid.Max},
		{CreatedAt: time.UnixMicro(math.MaxInt64).UTC(), ID: id},
		{CreatedAt: time.UnixMicro(math.MinInt64).UTC(), ID: id},
	} {
		tokens = append(tokens, EncodePageToken(k))
		f.Add(EncodePageToken(k), k.CreatedAt.UnixMicro(),
			binary.BigEndian.Uint64(k.ID[:8]), binary.BigEndian.Uint64(k.ID[8:]))
	}
	for i, s := range []string{
		"", "!!", "=", "bm90aGluZw", "MTIzL25vdC1hLXV1aWQ", "MTIz", "Lw",
		tokens[0][1:], tokens[0][:len(tokens[0])-1], tokens[0] + "==", tokens[0] + "A",
		base64.URLEncoding.EncodeToString([]byte("123/" + id.String())),
		base64.StdEncoding.EncodeToString([]byte("-99/" + uuid.Max.String())),
		b64([]byte("+123/" + id.String())),
		b64([]byte("00123/" + id.String())),
		b64([]byte("9223372036854775808/" + id.String())),
		b64([]byte("-9223372036854775809/" + id.String())),
		b64([]byte("123/" + id.String() + "/")),
		b64([]byte("123//" + id.String())),
		b64([]byte("/" + id.String())),
		b64([]byte("123/")),
		b64([]byte("123/{" + id.String() + "}")),
		b64([]byte("123/urn:uuid:" + id.String())),
		b64([]byte("123/" + strings.ToUpper(id.String()))),
		b64([]byte("123/" + strings.ReplaceAll(id.String(), "-", ""))),
		b64([]byte("123/" + id.String()[:35])),
		b64([]byte("123/" + id.String() + "0")),
		b64([]byte("1e3/" + id.String())),
		b64([]byte("\xff\x00/" + id.String())),
	} {
		f.Add(s, int64(i)*1_000_003, uint64(i), ^uint64(i))
	}
	f.Fuzz(func(t *testing.T, token string, micros int64, hi, lo uint64) {
		checkDecode(t, token)

		var id uuid.UUID
		binary.BigEndian.PutUint64(id[:8], hi)
		binary.BigEndian.PutUint64(id[8:], lo)
		k := PageKey{CreatedAt: time.UnixMicro(micros).UTC(), ID: id}
		enc := EncodePageToken(k)
		if enc == "" {
			t.Fatalf("EncodePageToken(%+v) is empty, which means the first page", k)
		}
		for _, c := range []byte(enc) {
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				t.Fatalf("token %q has %q, which is not URL-safe", enc, c)
			}
		}
		got, ok, err := DecodePageToken(enc)
		if err != nil || !ok || !sameKey(got, k) {
			t.Fatalf("DecodePageToken(EncodePageToken(%+v)) = %+v, %v, %v", k, got, ok, err)
		}
		// A token cut short is what a careless client sends back.
		for n := range len(enc) {
			checkDecode(t, enc[:n])
		}
	})
}

// checkDecode decodes a token a client sent back and checks the outcome.
func checkDecode(t *testing.T, token string) {
	t.Helper()
	k, ok, err := DecodePageToken(token)
	if token == "" {
		if ok || err != nil || k != (PageKey{}) {
			t.Fatalf("empty token = %+v, %v, %v; want the first page", k, ok, err)
		}
		return
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidPageToken) {
			t.Fatalf("DecodePageToken(%q) = %v, want an error wrapping ErrInvalidPageToken", token, err)
		}
		if ok || k != (PageKey{}) {
			t.Fatalf("DecodePageToken(%q) failed but returned %+v, %v", token, k, ok)
		}
		return
	}
	if !ok {
		t.Fatalf("DecodePageToken(%q) = %+v, not ok, without an error", token, k)
	}
	checkKey(t, k)
	again := EncodePageToken(k)
	k2, ok, err := DecodePageToken(again)
	if err != nil || !ok || !sameKey(k, k2) {
		t.Fatalf("re-encoding of %q is %q, which decodes to %+v, %v, %v; want %+v", token, again, k2, ok, err, k)
	}
	if third := EncodePageToken(k2); third != again {
		t.Fatalf("canonical token is not stable: %q, then %q", again, third)
	}
}

// checkKey checks what a store relies on: a UTC instant of microsecond
// precision, as both databases store it.
func checkKey(t *testing.T, k PageKey) {
	t.Helper()
	if k.CreatedAt.Location() != time.UTC {
		t.Fatalf("key time %v is not in UTC", k.CreatedAt)
	}
	if k.CreatedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("key time %v is finer than a microsecond", k.CreatedAt)
	}
	if got := time.UnixMicro(k.CreatedAt.UnixMicro()); !got.Equal(k.CreatedAt) {
		t.Fatalf("key time %v does not survive UnixMicro (%v)", k.CreatedAt, got)
	}
}

func sameKey(a, b PageKey) bool {
	return a.ID == b.ID && a.CreatedAt.Equal(b.CreatedAt) && a.CreatedAt.Location() == b.CreatedAt.Location()
}
