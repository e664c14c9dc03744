// criclient: a CRI client in one long-lived process with one gRPC connection, as kubelet
// is, so that what the benchmarks time is the runtime's part and not a client's process
// start (each crictl run costs about 20 ms of its own). Built offline by
// bench/criclient/build.sh inside cri-tools 1.26.1's source tree, against its vendor
// directory: the same gRPC, CRI API and client-go as crictl.
//
// usage:
//
//	criclient serve -endpoint unix:///PATH
//	criclient exec-rtt -endpoint unix:///PATH -container ID [-n 20]
//
// serve reads one JSON request a line on stdin and answers each with one JSON line on
// stdout, in order, until stdin ends (rkt-bench's scenarios 11 to 13):
//
//	{"op":"version"}                         {"runtime":"NAME VERSION","ns":N}
//	{"op":"up","pod":PATH,"ctr":PATH}        {"pod":ID,"ctr":ID,"ns":N}
//	{"op":"down","pod":ID,"ctr":ID}          {"ns":N}
//	{"op":"up_many","pairs":[[POD,CTR],...]} {"ns":N,"pods":[an up answer each]}
//	{"op":"down_many","pods":[ID,...]}       {"ns":N,"errors":[...]}
//
// up loads the pod's and the container's configuration files as crictl does (the same
// YAML-or-JSON decoder into the generated CRI structs, so the same field names:
// log_directory, cgroup_parent, log_path), then sends RunPodSandbox, CreateContainer (with
// the sandbox's configuration, as `crictl create POD CTR.json POD.json`) and
// StartContainer; down sends StopContainer (timeout 0, as `crictl stop --timeout 0`),
// RemoveContainer, StopPodSandbox and RemovePodSandbox. ns is the wall time of the RPCs
// alone, the files read before. up_many runs one up per pair in goroutines released
// together, ns until the last returned; down_many stops and removes every pod at once.
// A failure answers {"error":"RPC: message"} (up_many: per pod, with the pod's ID if its
// sandbox was made; down_many: in errors). Every RPC has a timeout of -timeout (120 s).
//
// exec-rtt prints the median round trip of a streaming exec of `true` as crictl does it
// (the Exec RPC for a URL, then client-go's SPDY executor on it), repeated -n times.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	restclient "k8s.io/client-go/rest"
	remoteclient "k8s.io/client-go/tools/remotecommand"
	pb "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: criclient serve -endpoint unix:///PATH [-timeout 120s]")
	fmt.Fprintln(os.Stderr, "       criclient exec-rtt -endpoint unix:///PATH -container ID [-n 20]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "exec-rtt":
		execRTT(os.Args[2:])
	default:
		usage()
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "criclient: %s: %v\n", what, err)
	os.Exit(1)
}

// dial makes the one connection (lazily: the first RPC connects).
func dial(endpoint string) (*grpc.ClientConn, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	return grpc.Dial(path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

// client is the runtime service on the one connection, each RPC bounded by timeout.
type client struct {
	rt      pb.RuntimeServiceClient
	timeout time.Duration
}

// call runs one RPC with the timeout, naming it in its error.
func (c *client) call(rpc string, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		return fmt.Errorf("%s: %w", rpc, err)
	}
	return nil
}

type request struct {
	Op    string      `json:"op"`
	Pod   string      `json:"pod"`
	Ctr   string      `json:"ctr"`
	Pairs [][2]string `json:"pairs"`
	Pods  []string    `json:"pods"`
}

// answer is one line of serve's output; each op fills its own fields.
type answer struct {
	Runtime string   `json:"runtime,omitempty"`
	Pod     string   `json:"pod,omitempty"`
	Ctr     string   `json:"ctr,omitempty"`
	Ns      int64    `json:"ns"`
	Pods    []answer `json:"pods,omitempty"`
	Errors  []string `json:"errors,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "unix:///PATH of the runtime")
	timeout := fs.Duration("timeout", 120*time.Second, "the longest one RPC may take")
	fs.Parse(args)
	if *endpoint == "" {
		usage()
	}
	conn, err := dial(*endpoint)
	if err != nil {
		fail("dial "+*endpoint, err)
	}
	defer conn.Close()
	c := &client{rt: pb.NewRuntimeServiceClient(conn), timeout: *timeout}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 16*1024*1024)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			a.Error = fmt.Sprintf("bad request: %v", err)
		} else {
			a = c.handle(&req)
		}
		if err := enc.Encode(&a); err != nil {
			fail("writing an answer", err)
		}
		if err := out.Flush(); err != nil {
			fail("writing an answer", err)
		}
	}
	if err := in.Err(); err != nil {
		fail("reading requests", err)
	}
}

func (c *client) handle(req *request) answer {
	switch req.Op {
	case "version":
		return c.version()
	case "up":
		return c.upFiles(req.Pod, req.Ctr)
	case "down":
		return c.down(req.Pod, req.Ctr)
	case "up_many":
		return c.upMany(req.Pairs)
	case "down_many":
		return c.downMany(req.Pods)
	}
	return answer{Error: fmt.Sprintf("unknown op %q (version, up, down, up_many, down_many)", req.Op)}
}

func (c *client) version() answer {
	t0 := time.Now()
	var r *pb.VersionResponse
	err := c.call("Version", func(ctx context.Context) (err error) {
		r, err = c.rt.Version(ctx, &pb.VersionRequest{})
		return
	})
	if err != nil {
		return answer{Error: err.Error()}
	}
	return answer{Runtime: r.RuntimeName + " " + r.RuntimeVersion, Ns: time.Since(t0).Nanoseconds()}
}

// configs are a pod's and its container's configurations, read from their files.
type configs struct {
	pod *pb.PodSandboxConfig
	ctr *pb.ContainerConfig
}

// decodeFile reads a configuration file into v the way crictl's loadPodSandboxConfig and
// loadContainerConfig do.
func decodeFile(path string, v interface{}) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func loadConfigs(podPath, ctrPath string) (configs, error) {
	var cfg configs
	cfg.pod = &pb.PodSandboxConfig{}
	cfg.ctr = &pb.ContainerConfig{}
	if err := decodeFile(podPath, cfg.pod); err != nil {
		return cfg, err
	}
	return cfg, decodeFile(ctrPath, cfg.ctr)
}

func (c *client) upFiles(podPath, ctrPath string) answer {
	cfg, err := loadConfigs(podPath, ctrPath)
	if err != nil {
		return answer{Error: "loading the configurations: " + err.Error()}
	}
	return c.up(cfg)
}

// up sends RunPodSandbox, CreateContainer and StartContainer in turn, as `crictl runp`,
// `create --no-pull` and `start` (or `crictl run --no-pull`) do.
func (c *client) up(cfg configs) answer {
	var a answer
	t0 := time.Now()
	step := func(rpc string, f func(ctx context.Context) error) bool {
		err := c.call(rpc, f)
		if err != nil {
			a.Error = err.Error()
		}
		return err == nil
	}
	_ = step("RunPodSandbox", func(ctx context.Context) error {
		r, err := c.rt.RunPodSandbox(ctx, &pb.RunPodSandboxRequest{Config: cfg.pod})
		if err == nil {
			a.Pod = r.PodSandboxId
		}
		return err
	}) && step("CreateContainer", func(ctx context.Context) error {
		r, err := c.rt.CreateContainer(ctx, &pb.CreateContainerRequest{
			PodSandboxId:  a.Pod,
			Config:        cfg.ctr,
			SandboxConfig: cfg.pod,
		})
		if err == nil {
			a.Ctr = r.ContainerId
		}
		return err
	}) && step("StartContainer", func(ctx context.Context) error {
		_, err := c.rt.StartContainer(ctx, &pb.StartContainerRequest{ContainerId: a.Ctr})
		return err
	})
	a.Ns = time.Since(t0).Nanoseconds()
	return a
}

// down sends StopContainer (timeout 0), RemoveContainer, StopPodSandbox and
// RemovePodSandbox in turn, stopping at the first failure.
func (c *client) down(pod, ctr string) answer {
	var a answer
	t0 := time.Now()
	steps := []struct {
		rpc string
		f   func(ctx context.Context) error
	}{
		{"StopContainer", func(ctx context.Context) error {
			_, err := c.rt.StopContainer(ctx, &pb.StopContainerRequest{ContainerId: ctr, Timeout: 0})
			return err
		}},
		{"RemoveContainer", func(ctx context.Context) error {
			_, err := c.rt.RemoveContainer(ctx, &pb.RemoveContainerRequest{ContainerId: ctr})
			return err
		}},
		{"StopPodSandbox", func(ctx context.Context) error {
			_, err := c.rt.StopPodSandbox(ctx, &pb.StopPodSandboxRequest{PodSandboxId: pod})
			return err
		}},
		{"RemovePodSandbox", func(ctx context.Context) error {
			_, err := c.rt.RemovePodSandbox(ctx, &pb.RemovePodSandboxRequest{PodSandboxId: pod})
			return err
		}},
	}
	for _, s := range steps {
		if err := c.call(s.rpc, s.f); err != nil {
			a.Error = err.Error()
			break
		}
	}
	a.Ns = time.Since(t0).Nanoseconds()
	return a
}

// atOnce runs f(i) for 0..n in goroutines released together and returns the time until
// the last one returned.
func atOnce(n int, f func(i int)) time.Duration {
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer done.Done()
			ready.Done()
			<-release
			f(i)
		}(i)
	}
	ready.Wait()
	t0 := time.Now()
	close(release)
	done.Wait()
	return time.Since(t0)
}

// upMany reads every pair's files first, then brings all the pods up at once.
func (c *client) upMany(pairs [][2]string) answer {
	cfgs := make([]configs, len(pairs))
	for i, p := range pairs {
		cfg, err := loadConfigs(p[0], p[1])
		if err != nil {
			return answer{Error: "loading the configurations: " + err.Error()}
		}
		cfgs[i] = cfg
	}
	pods := make([]answer, len(pairs))
	took := atOnce(len(pairs), func(i int) { pods[i] = c.up(cfgs[i]) })
	return answer{Ns: took.Nanoseconds(), Pods: pods}
}

// downMany stops and removes every pod at once (StopPodSandbox, then RemovePodSandbox).
func (c *client) downMany(pods []string) answer {
	errs := make([]string, len(pods))
	took := atOnce(len(pods), func(i int) {
		id := pods[i]
		err := c.call("StopPodSandbox", func(ctx context.Context) error {
			_, err := c.rt.StopPodSandbox(ctx, &pb.StopPodSandboxRequest{PodSandboxId: id})
			return err
		})
		if err == nil {
			err = c.call("RemovePodSandbox", func(ctx context.Context) error {
				_, err := c.rt.RemovePodSandbox(ctx, &pb.RemovePodSandboxRequest{PodSandboxId: id})
				return err
			})
		}
		if err != nil {
			errs[i] = fmt.Sprintf("pod %s: %v", id, err)
		}
	})
	a := answer{Ns: took.Nanoseconds()}
	for _, e := range errs {
		if e != "" {
			a.Errors = append(a.Errors, e)
		}
	}
	return a
}

// execRTT: the round trip of a CRI streaming exec of `true`, as crictl does it, repeated
// in this one process; prints the median in milliseconds (bench/cri_streaming.sh).
func execRTT(args []string) {
	fs := flag.NewFlagSet("exec-rtt", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "unix:///PATH of the runtime")
	container := fs.String("container", "", "the container to exec in")
	n := fs.Int("n", 20, "round trips")
	fs.Parse(args)
	if *endpoint == "" || *container == "" || *n < 1 {
		usage()
	}
	conn, err := dial(*endpoint)
	if err != nil {
		fail("dial "+*endpoint, err)
	}
	defer conn.Close()
	rt := pb.NewRuntimeServiceClient(conn)
	once := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := rt.Exec(ctx, &pb.ExecRequest{
			ContainerId: *container,
			Cmd:         []string{"true"},
			Stdout:      true,
			Stderr:      true,
		})
		if err != nil {
			return err
		}
		u, err := url.Parse(resp.Url)
		if err != nil {
			return fmt.Errorf("the exec URL %q: %w", resp.Url, err)
		}
		executor, err := remoteclient.NewSPDYExecutor(&restclient.Config{TLSClientConfig: restclient.TLSClientConfig{Insecure: true}}, "POST", u)
		if err != nil {
			return err
		}
		return executor.Stream(remoteclient.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	}
	if err := once(); err != nil { // warm
		fail("exec", err)
	}
	times := make([]float64, 0, *n)
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		if err := once(); err != nil {
			fail("exec", err)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
	}
	fmt.Printf("%.1f\n", median(times))
}

// median sorts times and returns their median: the middle one, or the mean of the middle
// two for an even count.
func median(times []float64) float64 {
	sort.Float64s(times)
	mid := len(times) / 2
	if len(times)%2 == 0 {
		return (times[mid-1] + times[mid]) / 2
	}
	return times[mid]
}
