package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/enclaveai/enclaveai/cluster"
)

// clusterCmd: enclaveai-cli cluster create|show|move, for deployments
// without a controller. create pushes a topology through the controller's
// own commands (CLUSTERX SETNODES with a version above every node's), so a
// controller can take over later; show prints each node's view and says
// whether they agree; move migrates a slot as the controller does
// (CLUSTERX MIGRATE, then the new topology to every node; docs/CLUSTER.md).
func clusterCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("cluster: want create, show or move (enclaveai-cli cluster create -h)")
	}
	switch args[0] {
	case "-h", "--help", "-help":
		fs, _ := clusterFlags("create|show|move")
		fs.Usage()
		return flag.ErrHelp
	case "create":
		return clusterCreate(args[1:], out)
	case "show":
		return clusterShow(args[1:], out)
	case "move":
		return clusterMove(args[1:], out)
	}
	return fmt.Errorf("cluster: unknown subcommand %q: want create, show or move", args[0])
}

// clusterFlags: -a, -user, -tls, -cacert, -cert, -key and -sni as the
// other subcommands; nodes are host:port arguments (their tls-ports with
// -tls).
func clusterFlags(name string) (*flag.FlagSet, *connFlags) {
	fs := newFlags("cluster")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: enclaveai-cli cluster %s [flags] host:port [host:port ...]\n\nFlags:\n", name)
		fs.PrintDefaults()
	}
	cf := &connFlags{}
	fs.StringVar(&cf.password, "a", "", "password (requirepass, or the user's with -user)")
	fs.StringVar(&cf.user, "user", "", "user name for AUTH")
	fs.BoolVar(&cf.tls, "tls", false, "connect to the nodes with TLS, at their tls-ports, which create then names in the topology (as tls-cluster yes needs)")
	cf.tlsFlags.register(fs, "key")
	return fs, cf
}

// dialNode connects to one host:port with cf's credentials.
func dialNode(cf *connFlags, addr string) (*client, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: want host:port", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("%s: bad port", addr)
	}
	c := *cf
	c.host, c.port = host, p
	return c.dial()
}

// clusterNode is one node named on the command line, connected.
type clusterNode struct {
	addr    string
	c       *client
	id      string
	version int64
}

// dialCluster connects to every node and reads its id and topology
// version; done closes the connections made.
func dialCluster(cf *connFlags, addrs []string) (nodes []clusterNode, done func(), err error) {
	done = func() {
		for _, n := range nodes {
			n.c.Close()
		}
	}
	if err := cf.load(cf.tls); err != nil {
		return nil, done, err
	}
	for _, a := range addrs {
		c, err := dialNode(cf, a)
		if err != nil {
			return nil, done, fmt.Errorf("%s: %w", a, err)
		}
		nodes = append(nodes, clusterNode{addr: a, c: c})
		id, err := c.do("CLUSTER", "MYID")
		if err != nil {
			return nil, done, fmt.Errorf("%s: %w (is cluster-enabled yes set?)", a, err)
		}
		v, err := c.do("CLUSTERX", "VERSION")
		if err != nil {
			return nil, done, fmt.Errorf("%s: %w", a, err)
		}
		nodes[len(nodes)-1].id, nodes[len(nodes)-1].version = id.String(), v.Int()
	}
	return nodes, done, nil
}

// splitSlots divides the slots among n masters as kvrocks-controller
// does: equal runs, the remainder on the last (3 nodes: 0-5460,
// 5461-10921, 10922-16383).
func splitSlots(n int) []cluster.Range {
	per := cluster.Slots / n
	out := make([]cluster.Range, n)
	for i := range out {
		out[i] = cluster.Range{Start: i * per, End: (i+1)*per - 1}
	}
	out[n-1].End = cluster.Slots - 1
	return out
}

func clusterCreate(args []string, out io.Writer) error {
	fs, cf := clusterFlags("create")
	version := fs.Int64("version", 0, "version to push (0: one above the highest a node has)")
	if err := parse(fs, args); err != nil {
		return err
	}
	addrs := fs.Args()
	if len(addrs) == 0 || len(addrs) > cluster.Slots {
		return errors.New("cluster create: name the nodes as host:port")
	}
	nodes, closeAll, err := dialCluster(cf, addrs)
	defer closeAll()
	if err != nil {
		return err
	}
	if err := sameTransport(nodes, cf.tls); err != nil {
		return err
	}
	var topo strings.Builder
	ranges := splitSlots(len(addrs))
	top := int64(-1)
	for i, n := range nodes {
		top = max(top, n.version)
		host, port, _ := net.SplitHostPort(n.addr)
		fmt.Fprintf(&topo, "%s %s %s master - %s\n", n.id, host, port, ranges[i])
	}
	if *version == 0 {
		*version = top + 1
	}
	if *version <= top {
		return fmt.Errorf("cluster create: -version %d is not above the nodes' highest, %d", *version, top)
	}
	if _, err := cluster.ParseNodes(topo.String()); err != nil {
		return err
	}
	if err := pushAll(nodes, topo.String(), *version); err != nil {
		return err
	}
	fmt.Fprintf(out, "pushed version %d to %d nodes:\n%s", *version, len(nodes), topo.String())
	return nil
}

// sameTransport checks that the nodes migrate slots over the transport
// create dials them with, since the topology names the addresses dialled
// and a migrating source dials its target at the one the topology names:
// over TLS under tls-cluster yes (the nodes' tls-ports), plain otherwise.
func sameTransport(nodes []clusterNode, useTLS bool) error {
	for _, n := range nodes {
		r, err := n.c.do("CONFIG", "GET", "tls-cluster")
		if err != nil {
			return fmt.Errorf("%s: CONFIG GET tls-cluster: %w", n.addr, err)
		}
		switch on := field(r, "tls-cluster").String() == "yes"; {
		case on && !useTLS:
			return fmt.Errorf("%s runs tls-cluster yes: its nodes migrate slots over TLS to the addresses in the topology, so name them by their tls-ports, with -tls (and -cacert, -cert, -key)", n.addr)
		case !on && useTLS:
			return fmt.Errorf("%s runs tls-cluster no: its nodes migrate slots over plain TCP to the addresses in the topology, so name them by their plain ports, without -tls", n.addr)
		}
	}
	return nil
}

func clusterShow(args []string, out io.Writer) error {
	fs, cf := clusterFlags("show")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("cluster show: name the nodes as host:port")
	}
	if err := cf.load(cf.tls); err != nil {
		return err
	}
	var first string
	agree := true
	for _, a := range fs.Args() {
		c, err := dialNode(cf, a)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		c.conn.SetDeadline(time.Now().Add(10 * time.Second))
		v, err1 := c.do("CLUSTERX", "VERSION")
		nodes, err2 := c.do("CLUSTER", "NODES")
		c.Close()
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		view := nodes.String()
		fmt.Fprintf(out, "%s: version %d\n%s", a, v.Int(), view)
		view = strings.ReplaceAll(view, "myself,", "")
		if first == "" {
			first = view
		} else if view != first {
			agree = false
		}
	}
	if !agree {
		return errors.New("the nodes' views differ: push the topology again")
	}
	fmt.Fprintln(out, "all nodes agree")
	return nil
}

// clusterMove: enclaveai-cli cluster move -slot N -to host:port host:port
// ... (every node of the cluster). The slot's owner migrates it to the node
// at -to (CLUSTERX MIGRATE); once its CLUSTER INFO says success, the
// topology with the slot moved is pushed to every node at a version above
// theirs, which ends the migration.
func clusterMove(args []string, out io.Writer) error {
	fs, cf := clusterFlags("move")
	slot := fs.Int("slot", -1, "the slot to move")
	to := fs.String("to", "", "host:port of the node that gets it (one of the nodes named)")
	wait := fs.Duration("timeout", 10*time.Minute, "how long the migration may take")
	if err := parse(fs, args); err != nil {
		return err
	}
	addrs := fs.Args()
	if len(addrs) == 0 || *slot < 0 || *slot >= cluster.Slots || *to == "" {
		return errors.New("cluster move: -slot, -to and every node as host:port are needed")
	}
	nodes, closeAll, err := dialCluster(cf, addrs)
	defer closeAll()
	if err != nil {
		return err
	}
	byAddr := map[string]*client{}
	var top *cluster.Topology
	version := int64(-1)
	for _, n := range nodes {
		if n.version > version {
			text, err := n.c.do("CLUSTER", "NODES")
			if err != nil {
				return fmt.Errorf("%s: %w", n.addr, err)
			}
			if top, err = cluster.FromClusterNodes(text.String()); err != nil {
				return fmt.Errorf("%s: %w", n.addr, err)
			}
			version = n.version
		}
		byAddr[n.addr], byAddr[n.id] = n.c, n.c
	}
	if top == nil {
		return errors.New("cluster move: no node has a topology yet (cluster create)")
	}
	owner := top.Owner(*slot)
	if owner == nil {
		return fmt.Errorf("cluster move: slot %d has no owner", *slot)
	}
	var target *cluster.Node
	for i := range top.Nodes {
		if n := &top.Nodes[i]; n.Addr() == *to || byAddr[*to] != nil && byAddr[*to] == byAddr[n.ID] {
			target = n
		}
	}
	if target == nil {
		return fmt.Errorf("cluster move: %s is not a node of the topology", *to)
	}
	src := byAddr[owner.ID]
	if src == nil {
		return fmt.Errorf("cluster move: the slot's owner %s (%s) is not among the nodes named", owner.ID, owner.Addr())
	}
	moved, err := top.WithSlot(*slot, target.ID)
	if err != nil {
		return err
	}
	if _, err := src.do("CLUSTERX", "MIGRATE", strconv.Itoa(*slot), target.ID); err != nil {
		return fmt.Errorf("%s: %w", owner.Addr(), err)
	}
	start := time.Now()
	for {
		r, err := src.do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		state := infoField(r.String(), "migrating_state")
		if state == "success" {
			break
		}
		if state != "start" {
			return fmt.Errorf("cluster move: the migration of slot %d ended in %q (the source's log says why); the slot stays on %s",
				*slot, state, owner.Addr())
		}
		if time.Since(start) > *wait {
			return fmt.Errorf("cluster move: slot %d still migrating after %v", *slot, *wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := pushAll(nodes, moved.Text(), version+1); err != nil {
		return err
	}
	fmt.Fprintf(out, "moved slot %d from %s to %s in %.2f s; pushed version %d to %d nodes\n",
		*slot, owner.Addr(), target.Addr(), time.Since(start).Seconds(), version+1, len(nodes))
	return nil
}

// pushAll sends the topology at version to every node.
func pushAll(nodes []clusterNode, topo string, version int64) error {
	for _, n := range nodes {
		if _, err := n.c.do("CLUSTERX", "SETNODES", topo, strconv.FormatInt(version, 10)); err != nil {
			return fmt.Errorf("%s: %w", n.addr, err)
		}
	}
	return nil
}

// infoField is a field of an INFO-style reply.
func infoField(text, name string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
