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
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
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
		if p.withhold.Load() && groupLookupBy(frame[4:], "relay-producer") {
			p.withheld.Add(1)
			continue
		}
		if _, err := b.Write(frame); err != nil {
			return
		}
	}
}

// groupLookupBy reports whether req (a request without its size) is a
// FindCoordinator for a group, sent by client.
func groupLookupBy(req []byte, client string) bool {
	if len(req) < 10 || binary.BigEndian.Uint16(req) != apiFindCoordinator {
		return false
	}
	version := binary.BigEndian.Uint16(req[2:])
	n := int(int16(binary.BigEndian.Uint16(req[8:]))) // client_id, a nullable string
	rest := req[10:]
	if n < 0 {
		n = 0
	}
	if len(rest) < n || string(rest[:n]) != client {
		return false
	}
	rest = rest[n:]
	switch {
	case version == 0:
		return true // groups only
	case version <= 3:
		// key (string), key_type (int8)
		if len(rest) < 2 {
			return false
		}
		k := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+k+1 {
			return false
		}
		return rest[2+k] == 0
	default:
		// Flexible header: tagged fields (none, one byte), then key_type.
		return len(rest) >= 2 && rest[0] == 0 && rest[1] == 0
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
		return append(b, client...)
	}
	v2 := func(client string, keyType byte) []byte {
		b := header(2, client)
		b = binary.BigEndian.AppendUint16(b, 3)
		return append(append(b, "grp"...), keyType)
	}
	cases := []struct {
		req  []byte
		want bool
	}{
		{v2("relay-producer", 0), true},
		{v2("relay-producer", 1), false}, // a transaction coordinator lookup
		{v2("relay-consumer", 0), false},
		{append(header(4, "relay-producer"), 0, 0, 1, 'x'), true},
		{append(header(4, "relay-producer"), 0, 1, 1, 'x'), false},
		{[]byte(strings.Repeat("x", 3)), false},
	}
	for i, c := range cases {
		if got := groupLookupBy(c.req, "relay-producer"); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}
