package cluster

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// State is what a node keeps across restarts: its id, the last topology
// pushed to it and that push's version (-1: none yet), and the slots on
// the move that the topology does not yet show moved.
type State struct {
	ID       string
	Version  int64
	Topology *Topology // nil before the first push
	// Handed maps a slot this node sent to the id of the node it went to;
	// Taken, a slot this node received to the id of the node it came
	// from. Until a topology push moves the slot, the keys are on the
	// node that took it: a node restarted in between forgot both and
	// served the slot without its keys (cluster review).
	Handed, Taken map[int]string
	// Migrating maps a slot this node is sending, or failed to send after
	// some of its keys went, to the target's id; Importing, a slot it is
	// receiving, or kept some keys of after a failed import, to the
	// source's id. Its keys may be on both nodes until a migration
	// finishes the move: a restarted node takes the slot as split.
	Migrating, Importing map[int]string
}

// NewID makes a random node id (40 hex characters, as Redis's).
func NewID() string {
	var b [IDLen / 2]byte
	rand.Read(b[:]) // crypto/rand does not fail
	return hex.EncodeToString(b[:])
}

// The state file's layouts (never to change; a new layout gets a new
// magic). Layout 3, the one written:
//
//	enclaveai-cluster-state 3\n
//	id <node id>\n
//	version <decimal, -1 for none>\n
//	<zero or more slots on the move, in this order, each by slot:>
//	handed <slot> <node id>\n
//	taken <slot> <node id>\n
//	migrating <slot> <node id>\n
//	importing <slot> <node id>\n
//	<topology as Topology.Text writes it, zero or more lines>
//	hmac <hex of the HMAC-SHA256 of every byte above>\n
//
// (a node id is 40 characters, so no word of a slot line starts a
// topology line). The HMAC's key is derived from the seal key (HKDF-SHA256,
// stateKeyLabel): the host, which can write the data dir but has not the
// key, cannot make a file a node accepts, so it cannot change the topology
// the node believes. The file is not encrypted: the topology is what
// CLUSTER NODES tells any client.
//
// Layouts 1 and 2, written by the builds before it, end with
// "sha256 <hex of the SHA-256 of every byte above>\n" in place of the
// HMAC, which anyone can compute; layout 1 has no slot lines, layout 2
// has them (it was written only while a slot was on the move). Decode
// reads them and says so (legacy), for the caller to refuse or to seal.
//
// The file is written to a temporary name, synced and renamed over the old
// one, so a crash leaves either the old state or the new.
const (
	stateMagic  = "enclaveai-cluster-state 1\n"
	stateMagic2 = "enclaveai-cluster-state 2\n"
	stateMagic3 = "enclaveai-cluster-state 3\n"
	// stateKeyLabel derives the state file's HMAC key from the seal key.
	// Part of layout 3: never change it.
	stateKeyLabel = "EnclaveAI cluster state key v1"
)

// ErrBadState is wrapped by Load's errors about the file's contents.
var ErrBadState = errors.New("bad cluster state file")

// stateMAC is the hex HMAC of body under the key derived from sealKey.
func stateMAC(sealKey, body []byte) []byte {
	key, _ := hkdf.Key(sha256.New, sealKey, nil, stateKeyLabel, 32) // fails only for lengths over 255*32
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// Encode returns the state file's bytes (layout 3), authenticated with a
// key derived from sealKey.
func (s *State) Encode(sealKey []byte) []byte {
	var b bytes.Buffer
	b.WriteString(stateMagic3)
	b.WriteString("id " + s.ID + "\n")
	b.WriteString("version " + strconv.FormatInt(s.Version, 10) + "\n")
	for _, h := range []struct {
		word  string
		slots map[int]string
	}{{"handed", s.Handed}, {"taken", s.Taken}, {"migrating", s.Migrating}, {"importing", s.Importing}} {
		for _, slot := range slices.Sorted(maps.Keys(h.slots)) {
			b.WriteString(h.word + " " + strconv.Itoa(slot) + " " + h.slots[slot] + "\n")
		}
	}
	if s.Topology != nil {
		b.WriteString(s.Topology.Text())
	}
	b.WriteString("hmac ")
	b.Write(stateMAC(sealKey, b.Bytes()[:b.Len()-len("hmac ")]))
	b.WriteString("\n")
	return b.Bytes()
}

// Decode reads a state file's bytes, checking every field. A file of
// layout 3 must carry the HMAC of sealKey's derived key. One of the
// unsealed layouts 1 and 2 is read if its checksum holds, and legacy is
// true: anyone who can write the file could have written it, and the
// caller decides whether to believe it.
func Decode(data, sealKey []byte) (s *State, legacy bool, err error) {
	var body []byte
	switch {
	case bytes.HasPrefix(data, []byte(stateMagic3)):
		i := bytes.LastIndex(data, []byte("hmac "))
		if i < 0 {
			return nil, false, fmt.Errorf("%w: no MAC", ErrBadState)
		}
		body = data[:i]
		if !hmac.Equal(bytes.TrimSuffix(data[i+len("hmac "):], []byte("\n")), stateMAC(sealKey, body)) {
			return nil, false, fmt.Errorf("%w: it fails its MAC (written under another seal key, or changed outside the server)", ErrBadState)
		}
	case bytes.HasPrefix(data, []byte(stateMagic)), bytes.HasPrefix(data, []byte(stateMagic2)):
		i := bytes.LastIndex(data, []byte("sha256 "))
		if i < 0 {
			return nil, true, fmt.Errorf("%w: no checksum", ErrBadState)
		}
		body = data[:i]
		sum := sha256.Sum256(body)
		if strings.TrimSuffix(string(data[i+len("sha256 "):]), "\n") != hex.EncodeToString(sum[:]) {
			return nil, true, fmt.Errorf("%w: checksum mismatch", ErrBadState)
		}
		legacy = true
	default:
		return nil, false, fmt.Errorf("%w: no header", ErrBadState)
	}
	s, err = decodeBody(body, !bytes.HasPrefix(data, []byte(stateMagic)))
	return s, legacy, err
}

// decodeBody reads the fields of a state file's body, whose MAC or
// checksum held; slotLines: its layout has slots on the move.
func decodeBody(body []byte, slotLines bool) (*State, error) {
	lines := strings.SplitN(string(body[len(stateMagic):]), "\n", 3)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "id ") || !strings.HasPrefix(lines[1], "version ") {
		return nil, fmt.Errorf("%w: no id or version", ErrBadState)
	}
	s := &State{ID: lines[0][3:]}
	if !ValidID(s.ID) {
		return nil, fmt.Errorf("%w: bad node id", ErrBadState)
	}
	v, err := strconv.ParseInt(lines[1][len("version "):], 10, 64)
	if err != nil || v < -1 {
		return nil, fmt.Errorf("%w: bad version", ErrBadState)
	}
	s.Version = v
	rest := lines[2]
	for slotLines {
		word, line, ok := strings.Cut(rest, "\n")
		f := strings.Fields(word)
		if !ok || len(f) != 3 {
			break
		}
		m := map[string]*map[int]string{"handed": &s.Handed, "taken": &s.Taken,
			"migrating": &s.Migrating, "importing": &s.Importing}[f[0]]
		if m == nil {
			break
		}
		slot, err := strconv.Atoi(f[1])
		if err != nil || slot < 0 || slot >= Slots || !ValidID(f[2]) {
			return nil, fmt.Errorf("%w: bad line %q", ErrBadState, word)
		}
		if *m == nil {
			*m = map[int]string{}
		}
		(*m)[slot] = f[2]
		rest = line
	}
	if v >= 0 {
		if s.Topology, err = ParseNodes(rest); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadState, err)
		}
	}
	return s, nil
}

// Load reads the state file at path (Decode); s is nil when there is
// none.
func Load(path string, sealKey []byte) (s *State, legacy bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return Decode(data, sealKey)
}

// Save writes the state to path atomically, sealed with sealKey's derived
// key (Encode): a temporary file in the same directory, synced, renamed
// over path, then the directory synced.
func Save(path string, sealKey []byte, s *State) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(s.Encode(sealKey))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
