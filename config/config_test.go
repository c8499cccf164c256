package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// at is the file:line of the table row that calls it.
func at() string {
	_, file, line, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(line)
}

func TestDefaults(t *testing.T) {
	o := Default()
	for name, want := range map[string]string{
		"port": "6379", "bind": "127.0.0.1", "requirepass": "", "maxmemory": "0", "maxclients": "10000",
		"timeout": "0", "proto-max-bulk-len": strconv.Itoa(512 << 20), "client-query-buffer-limit": strconv.Itoa(1 << 30),
		"loglevel": "notice", "dbfilename": "dump.aidb", "loadmodel": "",
	} {
		if got, ok := o.Get(name); !ok || got != want {
			t.Errorf("default %s = %q %v, want %q", name, got, ok, want)
		}
	}
	if err := o.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	names := Names()
	if !slices.IsSorted(names) || !slices.Contains(names, "maxmemory") || !slices.Contains(names, "loadmodel") {
		t.Errorf("Names() = %v", names)
	}
	for _, n := range names {
		if _, ok := o.Get(n); !ok || n != strings.ToLower(n) {
			t.Errorf("directive %q: Get %v", n, ok)
		}
	}
	if _, ok := o.Get("nosuch"); ok {
		t.Error("Get of an unknown directive")
	}
	if v, ok := o.Get("MaxMemory"); !ok || v != "0" {
		t.Error("Get is not case-insensitive")
	}
}

func TestSet(t *testing.T) {
	o := Default()
	rows := []struct {
		at, name, value string
		err             string // "" for success; else a substring
		get             string // the value CONFIG GET shows after
	}{
		{at(), "maxmemory", "1gb", "", "1073741824"},
		// masterauth is sent to other nodes, never shown.
		{at(), "masterauth", "node-secret", "", "(redacted)"},
		{at(), "masterauth", "", "", ""},
		{at(), "masteruser", "node", "", "node"},
		{at(), "MAXMEMORY", "100mb", "", "104857600"},
		{at(), "maxmemory", "abc", "memory value", "104857600"},
		{at(), "maxmemory", "-1", "memory value", "104857600"},
		{at(), "timeout", "30", "", "30"},
		{at(), "timeout", "x", "couldn't be parsed into an integer", "30"},
		{at(), "timeout", "-1", "between 0 and", "30"},
		// As redis-server 7.0.15's string2ll and memtoull (hunt).
		{at(), "timeout", "+5", "couldn't be parsed into an integer", "30"},
		{at(), "timeout", "05", "couldn't be parsed into an integer", "30"},
		{at(), "timeout", "-0", "couldn't be parsed into an integer", "30"},
		{at(), "timeout", " 5", "couldn't be parsed into an integer", "30"},
		{at(), "timeout", "0", "", "0"},
		{at(), "maxmemory", "+5", "memory value", "104857600"},
		{at(), "maxmemory", "-0", "memory value", "104857600"},
		{at(), "maxmemory", "05", "", "5"},
		{at(), "maxmemory", "100mb", "", "104857600"},
		{at(), "maxclients", "0", "argument must be between 1 and 2147483647 inclusive", "10000"},
		{at(), "proto-max-bulk-len", "1kb", "between", strconv.Itoa(512 << 20)},
		{at(), "proto-max-bulk-len", "1mb", "", strconv.Itoa(1 << 20)},
		{at(), "loglevel", "WARNING", "", "warning"},
		{at(), "loglevel", "loud", "one of the following", "warning"},
		{at(), "requirepass", "s3cret", "", "s3cret"},
		{at(), "requirepass", "", "", ""},
		{at(), "save", "900 1 300 10", "", "900 1 300 10"},
		{at(), "save", "900", "pairs", "900 1 300 10"},
		{at(), "save", "", "", ""},
		{at(), "save", "  ", "Invalid save parameters", ""},
		{at(), "save", "3600  1", "Invalid save parameters", ""},
	}
	for _, r := range rows {
		err := o.Set(r.name, r.value)
		switch {
		case r.err == "" && err != nil:
			t.Errorf("%s: Set(%s, %q): %v", r.at, r.name, r.value, err)
		case r.err != "" && (err == nil || !strings.Contains(err.Error(), r.err)):
			t.Errorf("%s: Set(%s, %q) = %v, want an error with %q", r.at, r.name, r.value, err, r.err)
		}
		if got, _ := o.Get(r.name); got != r.get {
			t.Errorf("%s: after Set(%s, %q) the value is %q, want %q", r.at, r.name, r.value, got, r.get)
		}
	}
	for _, name := range []string{"port", "bind", "dir", "dbfilename", "logfile", "onnxruntime-library", "model-dir", "seal-key-file"} {
		before, _ := o.Get(name)
		if err := o.Set(name, "1"); !errors.Is(err, ErrImmutable) {
			t.Errorf("Set(%s) = %v, want ErrImmutable", name, err)
		}
		if after, _ := o.Get(name); after != before {
			t.Errorf("a refused Set(%s) changed it to %q", name, after)
		}
	}
	for _, name := range []string{"nosuch", "loadmodel", ""} {
		if err := o.Set(name, "x"); !errors.Is(err, ErrUnknown) {
			t.Errorf("Set(%q) = %v, want ErrUnknown", name, err)
		}
	}
	if o.MaxMemory.Load() != 100<<20 || *o.Requirepass.Load() != "" {
		t.Error("Set did not reach the typed fields")
	}
	// Each directive sets its own field and no other.
	o, d := Default(), Default()
	if err := o.Set("loglevel", "debug"); err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		got, _ := o.Get(name)
		want, _ := d.Get(name)
		if name == "loglevel" {
			want = "debug"
		}
		if got != want {
			t.Errorf("after Set(loglevel, debug): %s = %q, want %q", name, got, want)
		}
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "enclaveai.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Load reads the file, then the flags, which override it; loadmodel lines
// are collected from both.
func TestLoad(t *testing.T) {
	file := writeFile(t, `# EnclaveAI
port 7000
  maxmemory 1mb
requirepass "pa ss"
save 900 1 300 10

loadmodel m1 ONNX CPU /models/a.onnx TAG "v 1"
loadmodel m2 ONNX CPU:0 /models/b.onnx
timeout 5
`)
	o, err := Load([]string{file, "--port", "7001", "--maxmemory", "2mb", "--loadmodel", "m3", "ONNX", "GPU", "/models/c.onnx", "--save", "60", "1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		// save lines add up, the flags' after the file's, as redis-server's.
		"port": "7001", "maxmemory": strconv.Itoa(2 << 20), "requirepass": "pa ss", "timeout": "5", "save": "900 1 300 10 60 1",
	} {
		if got, _ := o.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	want := [][]string{
		{"m1", "ONNX", "CPU", "/models/a.onnx", "TAG", "v 1"},
		{"m2", "ONNX", "CPU:0", "/models/b.onnx"},
		{"m3", "ONNX", "GPU", "/models/c.onnx"},
	}
	if !reflect.DeepEqual(o.LoadModels, want) {
		t.Errorf("LoadModels = %q, want %q", o.LoadModels, want)
	}
	// Three save lines keep three rules (operator review: only the last
	// was kept); an empty one clears what came before it.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--save", "900", "1", "--save", "300", "10", "--save", "60", "10000"}, "900 1 300 10 60 10000"},
		{[]string{"--save", "900", "1", "--save", "", "--save", "60", "1"}, "60 1"},
		{[]string{"--save", ""}, ""},
	} {
		o, err := Load(c.args)
		if got, _ := o.Get("save"); err != nil || got != c.want {
			t.Errorf("%q: save = %q (%v), want %q", c.args, got, err, c.want)
		}
	}
	// Flags alone, and immutable directives may be set at load.
	o, err = Load([]string{"--port", "1234", "--bind", "0.0.0.0", "--dir", "/tmp", "--engine-worker-memory", "512mb"})
	if err != nil || o.Port.Load() != 1234 || o.Bind != "0.0.0.0" || o.Dir != "/tmp" || o.EngineWorkerMemory != 512<<20 {
		t.Errorf("flags only: %v", err)
	}
	if o, err = Load(nil); err != nil || o.Port.Load() != 6379 {
		t.Errorf("no arguments: %v", err)
	}
}

// The TLS directives of node-to-node connections, as Redis names them:
// tls-cluster off and client certificates required (once a CA is given)
// by default; immutable, so that CONFIG SET cannot turn a cluster's TLS
// off; read back as set.
func TestTLSClusterDirectives(t *testing.T) {
	o := Default()
	for name, want := range map[string]string{"tls-cluster": "no", "tls-auth-clients": "yes", "tls-ca-cert-file": "",
		"tls-client-cert-file": "", "tls-client-key-file": ""} {
		if got, ok := o.Get(name); !ok || got != want {
			t.Errorf("default %s = %q %v, want %q", name, got, ok, want)
		}
		if err := o.Set(name, want); !errors.Is(err, ErrImmutable) {
			t.Errorf("CONFIG SET %s: %v, want ErrImmutable", name, err)
		}
	}
	o, err := Load([]string{"--tls-cluster", "yes", "--tls-port", "6380", "--tls-ca-cert-file", "/etc/ca.pem",
		"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-client-cert-file", "cc.pem",
		"--tls-client-key-file", "ck.pem", "--tls-auth-clients", "OPTIONAL"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.TLSCluster || o.TLSCACertFile != "/etc/ca.pem" || o.TLSClientCertFile != "cc.pem" || o.TLSClientKeyFile != "ck.pem" {
		t.Errorf("options: %+v", o)
	}
	if got, _ := o.Get("tls-auth-clients"); got != "optional" {
		t.Errorf("tls-auth-clients = %q, want optional", got)
	}
	// A marble presents the certificate its Coordinator issued.
	if _, err := Load([]string{"--tls-cluster", "yes", "--tls-port", "6380", "--tls-ca-cert-file", "ca.pem", "--marble", "yes"}); err != nil {
		t.Errorf("tls-cluster in marble mode: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	rows := []struct {
		at   string
		file string // "" for none
		args []string
		err  string
	}{
		{at(), "nosuch 1\n", nil, "line 1"},
		{at(), "# c\nport 1 2\n", nil, "line 2"},
		{at(), "port x\n", nil, `directive "port"`},
		{at(), "port 70000\n", nil, "between 0 and 65535"},
		{at(), "requirepass \"a\n", nil, "unbalanced quotes"},
		{at(), "loadmodel m ONNX CPU\n", nil, "loadmodel"},
		{at(), "dbfilename a/b\n", nil, "dbfilename"},
		{at(), "", []string{"--port"}, `directive "port"`},
		{at(), "", []string{"port", "1"}, "no such file"},
		{at(), "port 1\n", []string{"port", "1"}, "expected --directive"},
		{at(), "", []string{"--nosuch", "1"}, "unknown directive"},
		{at(), "", []string{"--dir", ""}, "dir must not be empty"},
		{at(), "", []string{"--save", "1"}, "pairs"},
		{at(), "", []string{"--tls-cert-file", "c.pem"}, "go together"},
		{at(), "", []string{"--tls-client-key-file", "k.pem"}, "tls-client-cert-file and tls-client-key-file go together"},
		{at(), "", []string{"--tls-auth-clients", "maybe"}, "yes, no, optional"},
		{at(), "", []string{"--tls-cluster", "on"}, `directive "tls-cluster"`},
		// tls-cluster without what it needs stops the start, naming it.
		{at(), "", []string{"--tls-cluster", "yes", "--tls-ca-cert-file", "ca.pem", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"},
			"tls-cluster yes needs tls-port"},
		{at(), "", []string{"--tls-cluster", "yes", "--tls-port", "6380", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"},
			"tls-cluster yes needs tls-ca-cert-file"},
		{at(), "", []string{"--tls-cluster", "yes", "--tls-port", "6380", "--tls-ca-cert-file", "ca.pem"},
			"tls-cluster yes needs tls-cert-file and tls-key-file (or marble yes)"},
		// A worker could not load ONNX Runtime at 64mb nor at 128mb, and
		// died making threads at 256mb (minWorkerMemory).
		{at(), "", []string{"--engine-worker-memory", "64mb"}, "at least 512mb"},
		{at(), "", []string{"--engine-worker-memory", "256mb"}, "at least 512mb"},
	}
	for _, r := range rows {
		args := r.args
		if r.file != "" {
			args = append([]string{writeFile(t, r.file)}, args...)
		}
		_, err := Load(args)
		if err == nil || !strings.Contains(err.Error(), r.err) {
			t.Errorf("%s: Load(%q) = %v, want an error with %q", r.at, args, err, r.err)
		}
	}
}
