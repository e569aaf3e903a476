package k8s

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"
)

// hostRegistry is the project's registry (Apicurio's Confluent API), which
// listens on the host's loopback.
func hostRegistry() string {
	if u := os.Getenv("RELAY_TEST_REGISTRY"); u != "" {
		return u
	}
	return "http://127.0.0.1:8081/apis/ccompat/v7"
}

// registryForPods forwards a port on the node's address to the registry
// on the host's loopback, for as long as the test runs, and returns the
// registry's URL through it, as the pods reach it.
func (c *cluster) registryForPods(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(c.nodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		conns sync.WaitGroup
		mu    sync.Mutex
		open  = map[net.Conn]bool{}
	)
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range open {
			_ = c.Close() // idle keep-alive connections would outlive the test
		}
		mu.Unlock()
		conns.Wait()
	})
	target := hostRegistryAddr(t)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return // closed at the end of the test
			}
			conns.Add(1)
			track(in, true)
			go func() {
				defer conns.Done()
				defer track(in, false)
				defer func() { _ = in.Close() }()
				out, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				track(out, true)
				defer track(out, false)
				defer func() { _ = out.Close() }()
				done := make(chan struct{})
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite(); close(done) }()
				_, _ = io.Copy(in, out)
				_ = in.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/apis/ccompat/v7"
}

func hostRegistryAddr(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(hostRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// loadSchema registers the JSON Schema of a load's framed values, an
// object with one string {"v": "<key>:<seq>"}, as the first version of
// topic's value subject, and returns the framing its records start with
// (magic byte 0, the schema's id).
func loadSchema(t *testing.T, topic string) []byte {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schemaType": "JSON",
		"schema": `{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`})
	subjectURL := fmt.Sprintf("%s/subjects/%s-value/versions", hostRegistry(), topic)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, subjectURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var got struct {
		ID uint32 `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || got.ID == 0 {
		t.Fatalf("register %s-value: %d %s", topic, resp.StatusCode, b)
	}
	frame := make([]byte, 5)
	binary.BigEndian.PutUint32(frame[1:], got.ID)
	return frame
}
