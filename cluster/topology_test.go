package cluster

import (
	"bytes"
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var (
	idA = strings.Repeat("a", 39) + "A"
	idB = "kvrocksController0Makes40AlnumIds0000000"
	idC = strings.Repeat("c", 40)
	idR = strings.Repeat("9", 40)
)

// The controller's own shape: lower-case roles, single slots without a
// dash, a trailing newline, a replica line.
func TestParseNodesControllerShape(t *testing.T) {
	text := idA + " 127.0.0.1 7001 master - 0-5460 8943\n" +
		idB + " 127.0.0.1 7002 master - 5461-8942 8944-10921\n" +
		idC + " 127.0.0.1 7003 master - 10922-16383\n" +
		idR + " 127.0.0.1 7004 slave " + idA + "\n"
	top, err := ParseNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := top.Owner(8943).ID; got != idA {
		t.Errorf("slot 8943 owner %s", got)
	}
	if got := top.Owner(8944).Addr(); got != "127.0.0.1:7002" {
		t.Errorf("slot 8944 owner %s", got)
	}
	if top.Assigned() != Slots {
		t.Errorf("assigned %d", top.Assigned())
	}
	if rs := top.Ranges(top.Find(idA)); len(rs) != 2 || rs[1] != (Range{8943, 8943}) {
		t.Errorf("ranges of A: %v", rs)
	}
	if r := top.Replicas(top.Find(idA)); len(r) != 1 || r[0].ID != idR {
		t.Errorf("replicas %v", r)
	}
	// Text round-trips.
	again, err := ParseNodes(top.Text())
	if err != nil || again.Text() != top.Text() || again.owner != top.owner {
		t.Errorf("round trip: %v\n%s", err, top.Text())
	}
}

func TestParseNodesErrors(t *testing.T) {
	m := func(id, rest string) string { return id + " 127.0.0.1 7001 " + rest + "\n" }
	for _, c := range []struct{ name, text string }{
		{"short id", m("abc", "master - 0-10")},
		{"bad id char", m(strings.Repeat("a", 39)+"-", "master - 0")},
		{"port", idA + " 127.0.0.1 0 master - 0\n"},
		{"port text", idA + " 127.0.0.1 x master - 0\n"},
		{"role", m(idA, "leader - 0")},
		{"master with master id", m(idA, "master "+idB+" 0")},
		{"slot too big", m(idA, "master - 16384")},
		{"range reversed", m(idA, "master - 10-5")},
		{"range sign", m(idA, "master - -5")},
		{"range plus", m(idA, "master - +5")},
		{"two owners", m(idA, "master - 0-10") + m(idB, "master - 10")},
		{"duplicate id", m(idA, "master - 0") + m(idA, "master - 1")},
		{"replica with slots", m(idA, "master - 0") + m(idB, "slave "+idA+" 5")},
		{"replica of nobody", m(idB, "slave "+idA)},
		{"replica of replica", m(idA, "master - 0") + m(idB, "slave "+idA) + m(idC, "slave "+idB)},
		{"too few fields", idA + " 127.0.0.1 7001 master\n"},
	} {
		if _, err := ParseNodes(c.text); !errors.Is(err, ErrTopology) {
			t.Errorf("%s: err %v", c.name, err)
		}
	}
}

// testSealKey is the seal key of the state files written here (and of
// testdata/state-v3).
var testSealKey = bytes.Repeat([]byte{0x5a}, 32)

func TestStateRoundTripAndMAC(t *testing.T) {
	top, err := ParseNodes(idA + " 10.0.0.1 7001 master - 0-16383\n")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nodes.aiconf")
	if s, _, err := Load(path, testSealKey); s != nil || err != nil {
		t.Fatalf("missing file: %+v err %v", s, err)
	}
	s := &State{ID: idB, Version: 7, Topology: top}
	if err := Save(path, testSealKey, s); err != nil {
		t.Fatal(err)
	}
	got, legacy, err := Load(path, testSealKey)
	if err != nil || legacy || got.ID != idB || got.Version != 7 || got.Topology.Text() != top.Text() {
		t.Fatalf("load: %+v %v %v", got, legacy, err)
	}
	// No topology yet: version -1 and no lines.
	if err := Save(path, testSealKey, &State{ID: idB, Version: -1}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := Load(path, testSealKey); err != nil || got.Topology != nil || got.Version != -1 {
		t.Fatalf("empty: %+v %v", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	// Slots on the move: layout 3 as well.
	s.Handed, s.Taken = map[int]string{3300: idA, 12: idA}, map[int]string{9000: idA}
	s.Migrating, s.Importing = map[int]string{5: idA}, map[int]string{6: idA}
	data := s.Encode(testSealKey)
	if !bytes.HasPrefix(data, []byte("enclaveai-cluster-state 3\n")) {
		t.Fatalf("layout: %q", data[:30])
	}
	got, legacy, err = Decode(data, testSealKey)
	if err != nil || legacy || !maps.Equal(got.Handed, s.Handed) || !maps.Equal(got.Taken, s.Taken) || got.Topology.Text() != top.Text() ||
		!maps.Equal(got.Migrating, s.Migrating) || !maps.Equal(got.Importing, s.Importing) {
		t.Fatalf("handoffs: %+v %v", got, err)
	}
}

// The host can write the data dir but has not the seal key: one byte
// changed anywhere, the file sealed under another key, or a topology
// edited and sealed again without the key are refused, each with the MAC
// named.
func TestStateRefusesWhatTheHostChanged(t *testing.T) {
	top, err := ParseNodes(idA + " 10.0.0.1 7001 master - 0-8191\n" + idB + " 10.0.0.2 7002 master - 8192-16383\n")
	if err != nil {
		t.Fatal(err)
	}
	s := &State{ID: idA, Version: 3, Topology: top, Handed: map[int]string{12: idB}}
	data := s.Encode(testSealKey)
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x20
		if _, _, err := Decode(bad, testSealKey); !errors.Is(err, ErrBadState) {
			t.Fatalf("flip at %d not caught: %v", i, err)
		}
	}
	other := bytes.Repeat([]byte{0x33}, 32)
	if _, _, err := Decode(data, other); !errors.Is(err, ErrBadState) || !strings.Contains(err.Error(), "MAC") {
		t.Fatalf("another seal key: %v", err)
	}
	// An edit that keeps the layout: every slot to node A, the MAC
	// recomputed with a key the host might guess (none).
	edited := bytes.Replace(data, []byte("0-8191"), []byte("0-16383"), 1)
	edited = bytes.Replace(edited, []byte(" master - 8192-16383"), []byte(" master -"), 1)
	i := bytes.LastIndex(edited, []byte("hmac "))
	edited = append(edited[:i:i], "hmac "+string(stateMAC(nil, edited[:i]))+"\n"...)
	if _, _, err := Decode(edited, testSealKey); !errors.Is(err, ErrBadState) {
		t.Fatalf("edited topology accepted: %v", err)
	}
}

// The layouts before the seal (1 and 2) are read, and said to be legacy:
// the caller decides (commands.StartCluster seals them when told to, and
// refuses them otherwise). A broken checksum is still refused.
func TestStateReadsTheUnsealedLayouts(t *testing.T) {
	for _, name := range []string{"state-v1", "state-v2"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		s, legacy, err := Decode(data, testSealKey)
		if err != nil || !legacy || s.ID != idA {
			t.Fatalf("%s: %+v legacy %v err %v", name, s, legacy, err)
		}
		// Written again, it is sealed and no longer legacy.
		again, legacy, err := Decode(s.Encode(testSealKey), testSealKey)
		if err != nil || legacy || again.Topology.Text() != s.Topology.Text() || !maps.Equal(again.Handed, s.Handed) {
			t.Fatalf("%s sealed: %+v %v %v", name, again, legacy, err)
		}
		bad := append([]byte(nil), data...)
		bad[len(stateMagic)+4] ^= 0x20
		if _, _, err := Decode(bad, testSealKey); !errors.Is(err, ErrBadState) {
			t.Fatalf("%s: flipped byte not caught: %v", name, err)
		}
	}
}

func FuzzParseNodes(f *testing.F) {
	f.Add(idA + " 127.0.0.1 7001 master - 0-5460 8943\n" + idR + " 127.0.0.1 7004 slave " + idA + "\n")
	f.Add(idA + " ::1 1 master - 16383\n\n")
	f.Add("x y z master -")
	f.Fuzz(func(t *testing.T, text string) {
		top, err := ParseNodes(text)
		if err != nil {
			return
		}
		// What parses round-trips through Text, and every owned slot's
		// owner is a master of the topology.
		again, err := ParseNodes(top.Text())
		if err != nil || again.owner != top.owner || len(again.Nodes) != len(top.Nodes) {
			t.Fatalf("round trip of %q: %v", text, err)
		}
		for s := 0; s < Slots; s++ {
			if o := top.Owner(s); o != nil && !o.Master() {
				t.Fatalf("slot %d owned by replica", s)
			}
		}
	})
}

// Every layout of the state file ever written keeps a golden file, read
// back field by field (STYLE rule 6): testdata/state-v1 (a topology) and
// state-v2 (slots handed and taken), unsealed, and state-v3, sealed under
// testSealKey, which is also written again byte for byte. go test -run
// TestStateGoldenFiles -update writes state-v3 (the unsealed layouts are
// no longer written).
func TestStateGoldenFiles(t *testing.T) {
	top, err := ParseNodes(idA + " 127.0.0.1 7001 master - 0-3299 3301-5460\n" +
		idB + " 127.0.0.1 7002 master - 3300 5461-16383\n" + idR + " 127.0.0.1 7003 slave " + idB + "\n")
	if err != nil {
		t.Fatal(err)
	}
	moving := &State{ID: idA, Version: 4, Topology: top, Handed: map[int]string{3300: idB}, Taken: map[int]string{9000: idB},
		Migrating: map[int]string{12: idB}, Importing: map[int]string{6000: idB}}
	for name, s := range map[string]*State{
		"state-v1": {ID: idA, Version: 3, Topology: top},
		"state-v2": moving,
		"state-v3": moving,
	} {
		path := filepath.Join("testdata", name)
		sealed := name == "state-v3"
		if *update && sealed {
			if err := os.WriteFile(path, s.Encode(testSealKey), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, legacy, err := Decode(data, testSealKey)
		if err != nil || legacy == sealed {
			t.Fatalf("%s: legacy %v, %v", name, legacy, err)
		}
		if got.ID != s.ID || got.Version != s.Version || got.Topology.Text() != top.Text() ||
			!maps.Equal(got.Handed, s.Handed) || !maps.Equal(got.Taken, s.Taken) ||
			!maps.Equal(got.Migrating, s.Migrating) || !maps.Equal(got.Importing, s.Importing) {
			t.Errorf("%s: read %+v", name, got)
		}
		if sealed && !bytes.Equal(got.Encode(testSealKey), data) {
			t.Errorf("%s: not written again byte for byte", name)
		}
	}
}

// FuzzDecodeState feeds Decode state files whose MAC is right, so that
// the fuzzer reaches the fields: whatever decodes is written again and
// decodes to the same state.
func FuzzDecodeState(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "state-v3"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:bytes.LastIndex(data, []byte("hmac "))])
	f.Add([]byte("enclaveai-cluster-state 3\nid " + idA + "\nversion -1\nhanded 1 " + idB + "\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, _, err := Decode(append(body, "hmac "+string(stateMAC(testSealKey, body))+"\n"...), testSealKey)
		if err != nil {
			return
		}
		again, _, err := Decode(s.Encode(testSealKey), testSealKey)
		if err != nil || again.ID != s.ID || again.Version != s.Version || !maps.Equal(again.Handed, s.Handed) ||
			!maps.Equal(again.Taken, s.Taken) || !maps.Equal(again.Migrating, s.Migrating) ||
			!maps.Equal(again.Importing, s.Importing) || (s.Topology == nil) != (again.Topology == nil) ||
			(s.Topology != nil && again.Topology.Text() != s.Topology.Text()) {
			t.Fatalf("%q: written again as %q (%v)", body, s.Encode(testSealKey), err)
		}
	})
}
