// rkt-spdy-probe drives a streaming server the way kubelet's clients do, with the real
// client-go and moby/spdystream from cri-tools' vendor directory, and prints what it saw
// as one JSON line. Built by crates/spdy/tests/go_interop.rs inside the extracted
// cri-tools source tree (go build -mod=vendor); see crates/spdy/README.md.
//
//	rkt-spdy-probe exec URL STDIN        exec without a tty
//	rkt-spdy-probe tty URL STDIN W H     exec with a tty and one resize
//	rkt-spdy-probe portforward URL PORT MESSAGE
//	rkt-spdy-probe frames                reference frames from spdystream's framer, in hex
//	rkt-spdy-probe readframes            frames on stdin, as spdystream's framer reads them
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moby/spdystream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	spdytransport "k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
)

type result struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   int    `json:"code"`
	Error  string `json:"error,omitempty"`
	// Millis is the time from the upgrade request to the end of the session.
	Millis float64 `json:"millis"`
}

type oneSize struct {
	size *remotecommand.TerminalSize
	done chan struct{}
}

func (q *oneSize) Next() *remotecommand.TerminalSize {
	if q.size != nil {
		s := q.size
		q.size = nil
		return s
	}
	<-q.done
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: rkt-spdy-probe exec|tty|portforward|frames ...")
	}
	switch os.Args[1] {
	case "exec", "tty":
		runExec(os.Args[1] == "tty")
	case "portforward":
		runPortForward()
	case "frames":
		frames()
	case "readframes":
		readFrames()
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(2)
}

func runExec(tty bool) {
	u, err := url.Parse(os.Args[2])
	if err != nil {
		fail(err.Error())
	}
	cfg := &rest.Config{Host: u.Scheme + "://" + u.Host, Timeout: 20 * time.Second}
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		fail(err.Error())
	}
	var stdout, stderr bytes.Buffer
	opts := remotecommand.StreamOptions{
		Stdin:  strings.NewReader(os.Args[3]),
		Stdout: &stdout,
		Tty:    tty,
	}
	done := make(chan struct{})
	start := time.Now()
	if tty {
		w, _ := strconv.Atoi(os.Args[4])
		h, _ := strconv.Atoi(os.Args[5])
		opts.TerminalSizeQueue = &oneSize{size: &remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}, done: done}
	} else {
		opts.Stderr = &stderr
	}
	err = ex.Stream(opts)
	close(done)
	res := result{Stdout: stdout.String(), Stderr: stderr.String(), Millis: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		if exit, ok := err.(utilexec.ExitError); ok {
			res.Code = exit.ExitStatus()
		} else {
			res.Code = -1
			res.Error = err.Error()
		}
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func runPortForward() {
	u, err := url.Parse(os.Args[2])
	if err != nil {
		fail(err.Error())
	}
	cfg := &rest.Config{Host: u.Scheme + "://" + u.Host}
	transport, upgrader, err := spdytransport.RoundTripperFor(cfg)
	if err != nil {
		fail(err.Error())
	}
	dialer := spdytransport.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var logs bytes.Buffer
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + os.Args[3]}, stop, ready, &logs, &logs)
	if err != nil {
		fail(err.Error())
	}
	errs := make(chan error, 1)
	go func() { errs <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errs:
		fail(fmt.Sprintf("port-forward: %v", err))
	}
	ports, err := pf.GetPorts()
	if err != nil {
		fail(err.Error())
	}
	replies := []string{}
	// Two connections: each is its own pair of streams with its own requestid.
	for i := 0; i < 2; i++ {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			fail(err.Error())
		}
		if _, err := conn.Write([]byte(os.Args[4])); err != nil {
			fail(err.Error())
		}
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		reply, err := io.ReadAll(conn)
		if err != nil {
			fail(err.Error())
		}
		conn.Close()
		replies = append(replies, string(reply))
	}
	close(stop)
	out, _ := json.Marshal(map[string]interface{}{"replies": replies})
	fmt.Println(string(out))
}

// frames prints, one per line, the hex of frames as spdystream's framer writes them,
// all through one framer (so the header blocks share one compression context).
func frames() {
	var buf bytes.Buffer
	framer, err := spdy.NewFramer(&buf, &buf)
	if err != nil {
		fail(err.Error())
	}
	emit := func(f spdy.Frame) {
		if err := framer.WriteFrame(f); err != nil {
			fail(err.Error())
		}
		fmt.Println(hex.EncodeToString(buf.Bytes()))
		buf.Reset()
	}
	emit(&spdy.SynStreamFrame{StreamId: 1, Headers: http.Header{"Streamtype": {"error"}}})
	emit(&spdy.SynStreamFrame{StreamId: 3, Priority: 2, CFHeader: spdy.ControlFrameHeader{Flags: spdy.ControlFlagFin}, Headers: http.Header{"Streamtype": {"stdin"}}})
	emit(&spdy.SynReplyFrame{StreamId: 1, Headers: http.Header{}})
	emit(&spdy.HeadersFrame{StreamId: 3, Headers: http.Header{"X": {"a", "b"}}})
	emit(&spdy.DataFrame{StreamId: 3, Flags: spdy.DataFlagFin, Data: []byte("hello")})
	emit(&spdy.RstStreamFrame{StreamId: 5, Status: spdy.Cancel})
	emit(&spdy.SettingsFrame{FlagIdValues: []spdy.SettingsFlagIdValue{{Flag: spdy.FlagSettingsPersistValue, Id: spdy.SettingsMaxConcurrentStreams, Value: 100}}})
	emit(&spdy.PingFrame{Id: 7})
	emit(&spdy.GoAwayFrame{LastGoodStreamId: 3, Status: spdy.GoAwayOK})
	emit(&spdy.WindowUpdateFrame{StreamId: 1, DeltaWindowSize: 65536})
}

// readFrames decodes stdin with one spdystream framer and prints each frame on a line.
func readFrames() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err.Error())
	}
	framer, err := spdy.NewFramer(io.Discard, bytes.NewReader(input))
	if err != nil {
		fail(err.Error())
	}
	headers := func(h http.Header) string {
		names := make([]string, 0, len(h))
		for n := range h {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := []string{}
		for _, n := range names {
			v := strings.Join(h[n], "|")
			if len(v) > 64 {
				v = fmt.Sprintf("<%d bytes>", len(v))
			}
			// http.Header canonicalises names; SPDY's are lowercase.
			parts = append(parts, strings.ToLower(n)+"="+v)
		}
		return strings.Join(parts, ",")
	}
	for {
		frame, err := framer.ReadFrame()
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Printf("error %v\n", err)
			return
		}
		switch f := frame.(type) {
		case *spdy.SynStreamFrame:
			fmt.Printf("SYN_STREAM %d flags=%d pri=%d %s\n", f.StreamId, f.CFHeader.Flags, f.Priority, headers(f.Headers))
		case *spdy.SynReplyFrame:
			fmt.Printf("SYN_REPLY %d flags=%d %s\n", f.StreamId, f.CFHeader.Flags, headers(f.Headers))
		case *spdy.HeadersFrame:
			fmt.Printf("HEADERS %d flags=%d %s\n", f.StreamId, f.CFHeader.Flags, headers(f.Headers))
		case *spdy.DataFrame:
			fmt.Printf("DATA %d flags=%d %q\n", f.StreamId, f.Flags, f.Data)
		case *spdy.RstStreamFrame:
			fmt.Printf("RST_STREAM %d status=%d\n", f.StreamId, f.Status)
		case *spdy.SettingsFrame:
			fmt.Printf("SETTINGS flags=%d %v\n", f.CFHeader.Flags, f.FlagIdValues)
		case *spdy.PingFrame:
			fmt.Printf("PING %d\n", f.Id)
		case *spdy.GoAwayFrame:
			fmt.Printf("GOAWAY %d status=%d\n", f.LastGoodStreamId, f.Status)
		case *spdy.WindowUpdateFrame:
			fmt.Printf("WINDOW_UPDATE %d %d\n", f.StreamId, f.DeltaWindowSize)
		default:
			fmt.Printf("other %T\n", f)
		}
	}
}
