// execbench: the round trip of a CRI streaming exec of `true`, as crictl does it (the Exec
// RPC for a URL, then client-go's SPDY executor on it), repeated in one process, so that
// what is timed is the runtime's part and not a client's process start. Built offline by
// bench/cri_streaming.sh inside cri-tools 1.26.1's source tree, against its vendor directory
// (the same gRPC, CRI API and client-go as crictl).
//
// usage: execbench -endpoint unix:///PATH -container ID [-n 20]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	restclient "k8s.io/client-go/rest"
	remoteclient "k8s.io/client-go/tools/remotecommand"
	pb "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "unix:///PATH of the runtime")
	container := flag.String("container", "", "the container to exec in")
	n := flag.Int("n", 20, "round trips")
	flag.Parse()
	path := strings.TrimPrefix(*endpoint, "unix://")
	conn, err := grpc.Dial(path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	client := pb.NewRuntimeServiceClient(conn)
	once := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := client.Exec(ctx, &pb.ExecRequest{
			ContainerId: *container,
			Cmd:         []string{"true"},
			Stdout:      true,
			Stderr:      true,
		})
		if err != nil {
			return err
		}
		executor, err := remoteclient.NewSPDYExecutor(&restclient.Config{TLSClientConfig: restclient.TLSClientConfig{Insecure: true}}, "POST", mustURL(resp.Url))
		if err != nil {
			return err
		}
		return executor.Stream(remoteclient.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	}
	if err := once(); err != nil { // warm
		fmt.Fprintln(os.Stderr, "exec:", err)
		os.Exit(1)
	}
	times := make([]float64, 0, *n)
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		if err := once(); err != nil {
			fmt.Fprintln(os.Stderr, "exec:", err)
			os.Exit(1)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
	}
	sort.Float64s(times)
	fmt.Printf("%.1f\n", times[len(times)/2])
}

func mustURL(raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "url:", err)
		os.Exit(1)
	}
	return u
}
