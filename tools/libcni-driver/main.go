// Command libcni-driver runs one CNI operation through the reference Go libcni, so tests and
// benchmarks can compare our runtime with it side by side. It is built in GOPATH mode from
// Debian's golang-github-appc-cni-dev sources (no downloads); see build.sh.
//
//	libcni-driver [flags] add|check|del|validate|load|cachedconf
//
// The plugin search path comes from CNI_PATH, like cnitool. "add" prints the result as JSON;
// "load" loads every configuration in -confdir and looks one network up by -net, as a runtime
// does at pod start; "validate" prints the capabilities the list declares; "cachedconf" reads
// the attachment's cache entry (GetNetworkListCachedConfig) and parses its config as a list,
// as runtimes that tear down from the cache do (CRI-O's ocicni), and prints that list's name
// and plugin count.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

func main() {
	conf := flag.String("conf", "", "network configuration file (.conflist, .conf or .json)")
	confDir := flag.String("confdir", "", "configuration directory, for load")
	netName := flag.String("net", "", "network to look up, for load")
	id := flag.String("id", "", "container ID")
	netns := flag.String("netns", "", "network namespace path")
	ifname := flag.String("ifname", "eth0", "interface name")
	cacheDir := flag.String("cache", "", "cache directory")
	args := flag.String("args", "", "CNI_ARGS, K=V;K=V")
	capArgs := flag.String("capargs", "", "capability arguments, a JSON object")
	flag.Parse()
	if flag.NArg() != 1 {
		fail(fmt.Errorf("expected one command: add, check, del, validate, load or cachedconf"))
	}
	cmd := flag.Arg(0)

	if cmd == "load" {
		list, err := load(*confDir, *netName)
		if err != nil {
			fail(err)
		}
		fmt.Println(list.Name)
		return
	}

	list, err := readList(*conf)
	if err != nil {
		fail(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(os.Getenv("CNI_PATH")), *cacheDir, nil)
	rt := &libcni.RuntimeConf{ContainerID: *id, NetNS: *netns, IfName: *ifname}
	if *args != "" {
		for _, kv := range strings.Split(*args, ";") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				fail(fmt.Errorf("-args: %q is not K=V", kv))
			}
			rt.Args = append(rt.Args, [2]string{k, v})
		}
	}
	if *capArgs != "" {
		if err := json.Unmarshal([]byte(*capArgs), &rt.CapabilityArgs); err != nil {
			fail(fmt.Errorf("-capargs: %w", err))
		}
	}

	ctx := context.Background()
	switch cmd {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			fail(err)
		}
		out, err := json.Marshal(res)
		if err != nil {
			fail(err)
		}
		fmt.Println(string(out))
	case "check":
		err = cni.CheckNetworkList(ctx, list, rt)
	case "del":
		err = cni.DelNetworkList(ctx, list, rt)
	case "validate":
		var caps []string
		caps, err = cni.ValidateNetworkList(ctx, list)
		if err == nil {
			fmt.Println(strings.Join(caps, ","))
		}
	case "cachedconf":
		var cached []byte
		cached, _, err = cni.GetNetworkListCachedConfig(list, rt)
		if err == nil && cached == nil {
			err = fmt.Errorf("no cache entry for %s-%s-%s", list.Name, rt.ContainerID, rt.IfName)
		}
		if err == nil {
			var cachedList *libcni.NetworkConfigList
			cachedList, err = libcni.ConfListFromBytes(cached)
			if err == nil {
				fmt.Printf("%s %d\n", cachedList.Name, len(cachedList.Plugins))
			}
		}
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fail(err)
	}
}

func readList(path string) (*libcni.NetworkConfigList, error) {
	if strings.HasSuffix(path, ".conflist") {
		return libcni.ConfListFromFile(path)
	}
	conf, err := libcni.ConfFromFile(path)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(conf)
}

// load mirrors how a runtime built on libcni picks a network: list the directory, load the
// files in order, and take the first whose name matches.
func load(dir, name string) (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(dir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		list, err := readList(f)
		if err != nil {
			return nil, err
		}
		if list.Name == name {
			return list, nil
		}
	}
	return nil, fmt.Errorf("network %q not found in %s", name, dir)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "libcni-driver:", err)
	os.Exit(1)
}
