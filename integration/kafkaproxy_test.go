package integration

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// kafkaProxy stands between clients and the single broker's PROXIED
// listener, which advertises the proxy's port (scripts/stack/kafka.sh), so
// every connection of a client bootstrapped through it passes here. It
// reads the request frames and, while withhold is set, drops the group
// coordinator lookups (FindCoordinator, key type group) of relay's
// producers (client.id relay-producer): the broker never sees them and
// never answers, as a coordinator lookup that is never re-triggered
// (confluentinc/librdkafka#5511) leaves a call waiting. Everything else,
// and every answer, passes as is.
type kafkaProxy struct {
	addr     string
	target   string
	l        net.Listener
	withhold atomic.Bool
	withheld atomic.Int64
	// unknown counts FindCoordinator requests of a version (or header)
	// the proxy cannot read while withholding: its verdict on them would
	// be a guess.
	unknown atomic.Int64
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

const apiFindCoordinator = 10

func startKafkaProxy(t *testing.T) *kafkaProxy {
	t.Helper()
	p := &kafkaProxy{addr: "127.0.0.1:" + envOr("RELAY_STACK_KAFKA_PROXY_PORT", "9096"),
		target: "127.0.0.1:" + envOr("RELAY_STACK_KAFKA_PROXIED_PORT", "9095")}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("kafka proxy: %v", err)
	}
	p.l = l
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *kafkaProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, b); _ = c.Close() }()
		go func() { defer p.wg.Done(); p.requests(c, b); _ = b.Close() }()
	}
}

// requests forwards c's request frames to b, but those it withholds.
func (p *kafkaProxy) requests(c, b net.Conn) {
	var size [4]byte
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
		copy(frame, size[:])
		if _, err := io.ReadFull(c, frame[4:]); err != nil {
			return
		}
		if p.withhold.Load() {
			group, known := groupLookupBy(frame[4:], "relay-producer")
			if !known {
				p.unknown.Add(1)
			}
			if group {
				p.withheld.Add(1)
				continue
			}
		}
		if _, err := b.Write(frame); err != nil {
			return
		}
	}
}

// maxFindCoordinator is the newest FindCoordinator version the proxy
// reads; a newer one is counted (unread), and the wedge test fails on it
// rather than misread it.
const maxFindCoordinator = 6

// groupLookupBy reports whether req (a request without its size) is a
// FindCoordinator for a group, sent by client; known is false for a
// FindCoordinator version the proxy cannot read.
func groupLookupBy(req []byte, client string) (group, known bool) {
	if len(req) < 10 || binary.BigEndian.Uint16(req) != apiFindCoordinator {
		return false, true
	}
	version := binary.BigEndian.Uint16(req[2:])
	if version > maxFindCoordinator {
		return false, false
	}
	// Request header: api key, version, correlation id, client_id (a
	// nullable int16-length string, in every header version).
	n := int(int16(binary.BigEndian.Uint16(req[8:])))
	rest := req[10:]
	if n < 0 {
		n = 0
	}
	if len(rest) < n || string(rest[:n]) != client {
		return false, true
	}
	rest = rest[n:]
	if version >= 3 {
		// Flexible versions (3+): the header's tagged fields; relay's
		// clients send none (a count of 0).
		if len(rest) < 1 || rest[0] != 0 {
			return false, false
		}
		rest = rest[1:]
	}
	switch {
	case version == 0:
		return true, true // key only: groups only
	case version <= 2:
		// key (int16-length string), key_type (int8)
		if len(rest) < 2 {
			return false, true
		}
		k := int(binary.BigEndian.Uint16(rest))
		return len(rest) >= 2+k+1 && rest[2+k] == 0, true
	case version == 3:
		// key (compact string: uvarint length + 1), key_type (int8)
		k, w := binary.Uvarint(rest)
		if w <= 0 || k == 0 || len(rest) < w+int(k-1)+1 {
			return false, true
		}
		return rest[w+int(k-1)] == 0, true
	default:
		// 4+ (KIP-699): key_type (int8) first, then the keys.
		return len(rest) >= 1 && rest[0] == 0, true
	}
}

func (p *kafkaProxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Sanity of the frame reading, on requests as librdkafka writes them.
func TestKafkaProxyReadsGroupLookups(t *testing.T) {
	header := func(version uint16, client string) []byte {
		b := binary.BigEndian.AppendUint16(nil, apiFindCoordinator)
		b = binary.BigEndian.AppendUint16(b, version)
		b = binary.BigEndian.AppendUint32(b, 7)
		b = binary.BigEndian.AppendUint16(b, uint16(len(client)))
		b = append(b, client...)
		if version >= 3 {
			b = append(b, 0) // no tagged fields
		}
		return b
	}
	v2 := func(client string, keyType byte) []byte {
		b := header(2, client)
		b = binary.BigEndian.AppendUint16(b, 3)
		return append(append(b, "grp"...), keyType)
	}
	v3 := func(keyType byte) []byte {
		b := append(header(3, "relay-producer"), 4) // compact string "grp": length 3 + 1
		return append(append(b, "grp"...), keyType, 0)
	}
	v4 := func(keyType byte) []byte {
		return append(header(4, "relay-producer"), keyType, 2, 4, 'g', 'r', 'p', 0)
	}
	cases := []struct {
		req          []byte
		group, known bool
	}{
		{v2("relay-producer", 0), true, true},
		{v2("relay-producer", 1), false, true}, // a transaction coordinator lookup
		{v2("relay-consumer", 0), false, true},
		{v3(0), true, true},
		{v3(1), false, true},
		{v4(0), true, true},
		{v4(1), false, true},
		{append(header(7, "relay-producer"), 0), false, false}, // newer than the proxy reads
		{[]byte(strings.Repeat("x", 3)), false, true},
	}
	for i, c := range cases {
		if group, known := groupLookupBy(c.req, "relay-producer"); group != c.group || known != c.known {
			t.Errorf("case %d: group %v known %v, want %v %v", i, group, known, c.group, c.known)
		}
	}
}
