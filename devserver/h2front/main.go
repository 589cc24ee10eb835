// h2front: an HTTPS front for the dev server that speaks HTTP/2 (and
// HTTP/1.1 to clients that do not offer h2 in ALPN). Python's http.server
// cannot speak HTTP/2; Go's net/http does, with the standard library only.
//
// Every request is forwarded to the plain-HTTP dev server given by
// --upstream; Server-Sent Events stream through unbuffered. Each request is
// appended to --log-file before it is forwarded, as
//
//	HTTP/2.0 GET /v1/apps/demo/boards conn=1
//
// (the protocol the client negotiated, and which TLS connection carried it),
// so tests observe HTTP/2 and connection reuse at the server. A dropped
// upstream response is dropped downstream too. --h1-only turns HTTP/2 off,
// for comparisons. The port is written to --port-file once the listener is
// up.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
)

type connKey struct{}

// requestLog appends one line per request; the file is shared by the
// handler goroutines.
type requestLog struct {
	mu   sync.Mutex
	file io.Writer
}

func (l *requestLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.file, line)
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on (0: any free port)")
	portFile := flag.String("port-file", "", "write the chosen port here once listening")
	upstream := flag.String("upstream", "", "plain-HTTP dev server URL, e.g. http://127.0.0.1:8080")
	cert := flag.String("tls-cert", "", "PEM certificate chain")
	key := flag.String("tls-key", "", "PEM private key")
	logFile := flag.String("log-file", "", "append one line per request here")
	h1Only := flag.Bool("h1-only", false, "serve HTTP/1.1 only (no h2 in ALPN)")
	flag.Parse()
	if *upstream == "" || *cert == "" || *key == "" {
		log.Fatal("--upstream, --tls-cert and --tls-key are required")
	}
	target, err := url.Parse(*upstream)
	if err != nil {
		log.Fatalf("--upstream: %v", err)
	}
	var sink io.Writer = io.Discard
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatalf("--log-file: %v", err)
		}
		defer f.Close()
		sink = f
	}
	requests := &requestLog{file: sink}

	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // flush every write: the config stream is SSE
	// A dropped upstream connection (the dev server's "drop" fault) drops
	// the client's request too (an h2 stream reset, or a closed HTTP/1.1
	// connection) instead of becoming a 502, so faults mean the same here.
	proxy.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	var connections atomic.Int64
	server := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.add(fmt.Sprintf("%s %s %s conn=%d", r.Proto, r.Method, r.URL.RequestURI(), r.Context().Value(connKey{})))
			proxy.ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, connections.Add(1))
		},
	}
	if *h1Only {
		// A non-nil, empty map keeps net/http from adding h2 to ALPN.
		server.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	// Loaded before the port is published, so a bad pair fails the start.
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatalf("--tls-cert/--tls-key: %v", err)
	}
	server.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}}
	listener, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		log.Fatal(err)
	}
	if *portFile != "" {
		chosen := listener.Addr().(*net.TCPAddr).Port
		tmp := *portFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintln(chosen)), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *portFile); err != nil {
			log.Fatal(err)
		}
	}
	log.Fatal(server.ServeTLS(listener, "", ""))
}
