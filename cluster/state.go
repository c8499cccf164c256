package cluster

import (
	"bytes"
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
// magic):
//
//	enclaveai-cluster-state 1\n
//	id <node id>\n
//	version <decimal, -1 for none>\n
//	<topology as Topology.Text writes it, zero or more lines>
//	sha256 <hex of the SHA-256 of every byte above>\n
//
// and, written only while a slot is on the move (so that a build without
// it reads the file the rest of the time), layout 2: the same with,
// between the version and the topology, zero or more lines
//
//	handed <slot> <node id>\n
//	taken <slot> <node id>\n
//	migrating <slot> <node id>\n
//	importing <slot> <node id>\n
//
// (a node id is 40 characters, so neither word starts a topology line).
//
// The checksum catches a torn or edited file; the file is written to a
// temporary name, synced and renamed over the old one, so a crash leaves
// either the old state or the new.
const (
	stateMagic  = "enclaveai-cluster-state 1\n"
	stateMagic2 = "enclaveai-cluster-state 2\n"
)

// ErrBadState is wrapped by Load's errors about the file's contents.
var ErrBadState = errors.New("bad cluster state file")

// Encode returns the state file's bytes.
func (s *State) Encode() []byte {
	var b bytes.Buffer
	if len(s.Handed)+len(s.Taken)+len(s.Migrating)+len(s.Importing) == 0 {
		b.WriteString(stateMagic)
	} else {
		b.WriteString(stateMagic2)
	}
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
	sum := sha256.Sum256(b.Bytes())
	b.WriteString("sha256 " + hex.EncodeToString(sum[:]) + "\n")
	return b.Bytes()
}

// Decode reads a state file's bytes, checking every field.
func Decode(data []byte) (*State, error) {
	i := bytes.LastIndex(data, []byte("sha256 "))
	v2 := bytes.HasPrefix(data, []byte(stateMagic2))
	if !(bytes.HasPrefix(data, []byte(stateMagic)) || v2) || i < 0 {
		return nil, fmt.Errorf("%w: no header or checksum", ErrBadState)
	}
	body, tail := data[:i], strings.TrimSuffix(string(data[i+len("sha256 "):]), "\n")
	sum := sha256.Sum256(body)
	if tail != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadState)
	}
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
	for v2 {
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

// Load reads the state file at path; ok is false when there is none.
func Load(path string) (s *State, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	s, err = Decode(data)
	return s, err == nil, err
}

// Save writes the state to path atomically: a temporary file in the same
// directory, synced, renamed over path, then the directory synced.
func Save(path string, s *State) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(s.Encode())
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
