package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// IDLen is the length of a node id: 40 characters of [A-Za-z0-9]
// (kvrocks-controller makes random alphanumeric ids, Redis hex ones).
const IDLen = 40

// ValidID reports whether id is a node id.
func ValidID(id string) bool {
	if len(id) != IDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Node is one line of a topology: a master with its slots, or a replica
// of a master (replicas own no slots).
type Node struct {
	ID       string
	IP       string
	Port     int
	MasterID string // "" for a master
}

// Master reports whether n is a master.
func (n *Node) Master() bool { return n.MasterID == "" }

// Addr is "ip:port", as MOVED names it.
func (n *Node) Addr() string { return n.IP + ":" + strconv.Itoa(n.Port) }

// Range is the slots Start..End, both included.
type Range struct{ Start, End int }

// Topology is who serves which slot: the nodes in the order they were
// pushed and each slot's master. It is immutable once parsed.
type Topology struct {
	Nodes []Node
	owner [Slots]int16 // index into Nodes; -1: no owner
}

// Owner returns the master serving slot, nil when none does.
func (t *Topology) Owner(slot int) *Node {
	if i := t.owner[slot]; i >= 0 {
		return &t.Nodes[i]
	}
	return nil
}

// Find returns the node with id, nil when it is not in the topology.
func (t *Topology) Find(id string) *Node {
	for i := range t.Nodes {
		if t.Nodes[i].ID == id {
			return &t.Nodes[i]
		}
	}
	return nil
}

// Ranges returns the slots node owns as maximal runs, in slot order.
func (t *Topology) Ranges(n *Node) []Range {
	idx := int16(-1)
	for i := range t.Nodes {
		if &t.Nodes[i] == n || t.Nodes[i].ID == n.ID {
			idx = int16(i)
		}
	}
	var out []Range
	for s := 0; s < Slots; s++ {
		if t.owner[s] != idx || idx < 0 {
			continue
		}
		if len(out) > 0 && out[len(out)-1].End == s-1 {
			out[len(out)-1].End = s
		} else {
			out = append(out, Range{s, s})
		}
	}
	return out
}

// Assigned is the number of slots with an owner.
func (t *Topology) Assigned() int {
	n := 0
	for _, o := range t.owner {
		if o >= 0 {
			n++
		}
	}
	return n
}

// Replicas returns the replicas of master, in topology order.
func (t *Topology) Replicas(master *Node) []*Node {
	var out []*Node
	for i := range t.Nodes {
		if t.Nodes[i].MasterID == master.ID {
			out = append(out, &t.Nodes[i])
		}
	}
	return out
}

// Text is the topology in the format ParseNodes reads, one line per node
// with its slots as maximal ranges: what the state file keeps.
func (t *Topology) Text() string {
	var b strings.Builder
	for i := range t.Nodes {
		n := &t.Nodes[i]
		b.WriteString(n.ID + " " + n.IP + " " + strconv.Itoa(n.Port))
		if !n.Master() {
			b.WriteString(" slave " + n.MasterID + "\n")
			continue
		}
		b.WriteString(" master -")
		for _, r := range t.Ranges(n) {
			b.WriteString(" " + r.String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// String is "start-end", or "start" for a single slot.
func (r Range) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// Largest bounds on a topology text, checked before it is parsed: enough
// for a thousand nodes each with its slots one by one.
const (
	maxTopologyBytes = 4 << 20
	maxNodes         = 1000
)

// ErrTopology is wrapped by every error ParseNodes returns.
var ErrTopology = errors.New("invalid cluster nodes info")

// ParseNodes reads the topology CLUSTERX SETNODES carries: one node per
// line (lines separated by "\n", blank lines ignored),
//
//	<id> <ip> <port> master - [<slot>|<start>-<end> ...]
//	<id> <ip> <port> slave <master-id>
//
// Every slot has at most one owner, ids are unique and a replica's master
// is a master of the same topology.
func ParseNodes(text string) (*Topology, error) {
	if len(text) > maxTopologyBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrTopology, maxTopologyBytes)
	}
	t := &Topology{}
	for i := range t.owner {
		t.owner[i] = -1
	}
	seen := map[string]bool{}
	for lineNo, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: line %d: %s", ErrTopology, lineNo+1, fmt.Sprintf(format, a...))
		}
		if len(t.Nodes) == maxNodes {
			return nil, bad("more than %d nodes", maxNodes)
		}
		if len(f) < 5 {
			return nil, bad("want <id> <ip> <port> master|slave <master-id>|- [slots]")
		}
		n := Node{ID: f[0], IP: f[1]}
		if !ValidID(n.ID) {
			return nil, bad("node id must be %d characters of [A-Za-z0-9]", IDLen)
		}
		if seen[n.ID] {
			return nil, bad("node %s appears twice", n.ID)
		}
		seen[n.ID] = true
		if len(n.IP) > 255 || strings.ContainsAny(n.IP, ",@") {
			return nil, bad("bad address %q", n.IP)
		}
		port, err := strconv.Atoi(f[2])
		if err != nil || port < 1 || port > 65535 {
			return nil, bad("bad port %q", f[2])
		}
		n.Port = port
		switch strings.ToLower(f[3]) {
		case "master":
			if f[4] != "-" {
				return nil, bad("a master's master id must be -")
			}
		case "slave", "replica":
			if !ValidID(f[4]) || f[4] == n.ID {
				return nil, bad("bad master id of replica %s", n.ID)
			}
			if len(f) > 5 {
				return nil, bad("a replica owns no slots")
			}
			n.MasterID = f[4]
		default:
			return nil, bad("role must be master or slave")
		}
		idx := int16(len(t.Nodes))
		for _, r := range f[5:] {
			rg, err := parseRange(r)
			if err != nil {
				return nil, bad("%v", err)
			}
			for s := rg.Start; s <= rg.End; s++ {
				if t.owner[s] >= 0 {
					return nil, bad("slot %d has two owners", s)
				}
				t.owner[s] = idx
			}
		}
		t.Nodes = append(t.Nodes, n)
	}
	for i := range t.Nodes {
		if m := t.Nodes[i].MasterID; m != "" {
			if o := t.Find(m); o == nil || !o.Master() {
				return nil, fmt.Errorf("%w: the master %s of replica %s is not a master here", ErrTopology, m, t.Nodes[i].ID)
			}
		}
	}
	return t, nil
}

// parseRange reads "<slot>" or "<start>-<end>".
func parseRange(s string) (Range, error) {
	a, b, dash := strings.Cut(s, "-")
	start, err1 := parseSlot(a)
	end := start
	var err2 error
	if dash {
		end, err2 = parseSlot(b)
	}
	if err1 != nil || err2 != nil || end < start {
		return Range{}, fmt.Errorf("bad slot range %q", s)
	}
	return Range{start, end}, nil
}

// parseSlot reads a slot number: decimal digits only, below Slots.
func parseSlot(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, errors.New("bad slot")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("bad slot")
		}
		n = n*10 + int(s[i]-'0')
	}
	if n >= Slots {
		return 0, errors.New("bad slot")
	}
	return n, nil
}

// ParseSlot reads a slot argument (CLUSTER COUNTKEYSINSLOT, CLUSTERX
// MIGRATE): a decimal integer in [0, Slots).
func ParseSlot(s string) (int, bool) {
	n, err := parseSlot(s)
	return n, err == nil
}
