package cluster

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// FromClusterNodes rebuilds a topology from a node's CLUSTER NODES reply
// (Redis's format: `<id> <ip:port@bus> <flags> <master-id|-> <ping> <pong>
// <epoch> <link> [<slot>|<start>-<end> ...]`), which is how a tool
// without a controller learns the topology the nodes were pushed. A
// node's slots on the move ("[slot->-id]", "[slot-<-id]") are not
// ownership, and are skipped.
func FromClusterNodes(text string) (*Topology, error) {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("%w: CLUSTER NODES line %q", ErrTopology, line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: CLUSTER NODES address %q", ErrTopology, f[1])
		}
		if strings.Contains(f[2], "slave") {
			fmt.Fprintf(&b, "%s %s %s slave %s\n", f[0], host, port, f[3])
			continue
		}
		slots := slices.DeleteFunc(f[8:], func(s string) bool { return strings.HasPrefix(s, "[") })
		fmt.Fprintf(&b, "%s %s %s master - %s\n", f[0], host, port, strings.Join(slots, " "))
	}
	return ParseNodes(b.String())
}

// WithSlot returns a copy of t in which slot belongs to the master id.
func (t *Topology) WithSlot(slot int, id string) (*Topology, error) {
	to := t.Find(id)
	if to == nil || !to.Master() {
		return nil, fmt.Errorf("%w: %s is not a master of the topology", ErrTopology, id)
	}
	if slot < 0 || slot >= Slots {
		return nil, fmt.Errorf("%w: slot %d", ErrTopology, slot)
	}
	c := &Topology{Nodes: t.Nodes, owner: t.owner}
	for i := range c.Nodes {
		if c.Nodes[i].ID == id {
			c.owner[slot] = int16(i)
		}
	}
	return c, nil
}
