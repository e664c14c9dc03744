// Command appc_decode reads, on stdin, what rkt printed and reads it the way HashiCorp
// Nomad v0.10.9's rkt task driver (drivers/rkt/driver.go) does, with the libraries Nomad
// vendors: appc/spec's schema for pod manifests and hashicorp/go-version for versions.
// It is built by crates/rkt/tests/cli/nomad_cli.rs in GOPATH mode inside Nomad's source
// tree, so that its imports resolve to Nomad's vendor directory.
//
//	appc_decode version                  `rkt version`: the driver's two regular
//	                                     expressions and its minimum rkt version
//	appc_decode manifest [SVC=NAME...]   `rkt cat-manifest`: json.Unmarshal into
//	                                     schema.PodManifest (whose UnmarshalJSON checks
//	                                     it), then each app, the pod's ports, and each
//	                                     SVC=NAME of a port_map looked up as the driver
//	                                     looks it up
//
// It prints one fact a line, for the Rust test to compare, and exits 1 with the decoder's
// error when Nomad would fail.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"regexp"
	"strings"

	appcschema "github.com/appc/spec/schema"
	version "github.com/hashicorp/go-version"
)

// The driver's expressions and minimum, as drivers/rkt/driver.go has them.
var (
	rktVersionRe  = regexp.MustCompile(`rkt [vV]ersion[:]? (\d[.\d]+)`)
	appcVersionRe = regexp.MustCompile(`appc [vV]ersion[:]? (\d[.\d]+)`)
	minRktVersion = "1.27.0"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "appc_decode: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: appc_decode version | manifest [SVC=NAME...]")
	}
	input, err := ioutil.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
	switch os.Args[1] {
	case "version":
		checkVersion(string(input))
	case "manifest":
		decodeManifest(input, os.Args[2:])
	default:
		fail("unknown mode %q", os.Args[1])
	}
}

func checkVersion(out string) {
	rkt := rktVersionRe.FindStringSubmatch(out)
	appc := appcVersionRe.FindStringSubmatch(out)
	if len(rkt) != 2 || len(appc) != 2 {
		fail("Unable to parse rkt version string")
	}
	min, _ := version.NewVersion(minRktVersion)
	current, err := version.NewVersion(rkt[1])
	if err != nil {
		fail("rkt version %q: %v", rkt[1], err)
	}
	if current.LessThan(min) {
		fail("rkt version %s is older than the driver's minimum %s", current, min)
	}
	fmt.Printf("rkt %s\nappc %s\n", rkt[1], appc[1])
}

func decodeManifest(input []byte, portMap []string) {
	var manifest appcschema.PodManifest
	if err := json.Unmarshal(input, &manifest); err != nil {
		fail("decoding the pod manifest: %v", err)
	}
	fmt.Printf("kind %s\nversion %s\n", manifest.ACKind, manifest.ACVersion)
	for _, app := range manifest.Apps {
		image := "-"
		if app.Image.Name != nil {
			image = app.Image.Name.String()
		}
		id := "-"
		if !app.Image.ID.Empty() {
			id = app.Image.ID.String()
		}
		fmt.Printf("app %s image %s id %s\n", app.Name, image, id)
		for _, label := range app.Image.Labels {
			fmt.Printf("label %s %s=%s\n", app.Name, label.Name, label.Value)
		}
		if app.App == nil {
			fmt.Printf("noapp %s\n", app.Name)
			continue
		}
		fmt.Printf("exec %s %s\n", app.Name, strings.Join(app.App.Exec, " "))
		fmt.Printf("user %s %s:%s\n", app.Name, app.App.User, app.App.Group)
		for _, port := range app.App.Ports {
			fmt.Printf("port %s %s %s/%d\n", app.Name, port.Name, port.Protocol, port.Port)
		}
		for _, isolator := range app.App.Isolators {
			var value bytes.Buffer
			if err := json.Compact(&value, *isolator.ValueRaw); err != nil {
				fail("isolator %s: %v", isolator.Name, err)
			}
			fmt.Printf("isolator %s %s %s\n", app.Name, isolator.Name, value.String())
		}
		for _, mount := range app.Mounts {
			fmt.Printf("mount %s %s %s\n", app.Name, mount.Volume, mount.Path)
		}
	}
	for _, volume := range manifest.Volumes {
		fmt.Printf("volume %s %s\n", volume.Name, volume.Kind)
	}
	for _, port := range manifest.Ports {
		fmt.Printf("podport %s %d\n", port.Name, port.HostPort)
	}
	for _, annotation := range manifest.Annotations {
		fmt.Printf("annotation %s=%s\n", annotation.Name, annotation.Value)
	}
	if len(portMap) == 0 {
		return
	}
	// As rktManifestMakePortMap: exactly one app, its App's ports looked up by name.
	if len(manifest.Apps) != 1 {
		fail("port_map needs exactly one app, the manifest has %d", len(manifest.Apps))
	}
	app := manifest.Apps[0]
	if app.App == nil {
		fail("specified app has no App object")
	}
	for _, pair := range portMap {
		kv := strings.SplitN(pair, "=", 2)
		found := false
		for _, port := range app.App.Ports {
			if port.Name.String() == kv[1] {
				fmt.Printf("port_map %s %d\n", kv[0], port.Port)
				found = true
			}
		}
		if !found {
			fmt.Printf("port_map %s none\n", kv[0])
		}
	}
}
