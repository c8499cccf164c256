package cluster

import "testing"

func TestFromClusterNodesAndWithSlot(t *testing.T) {
	a, b := "kvrocksControllerNodeA000000000000000000", "kvrocksControllerNodeB000000000000000000"
	// A slot on the move ([...], on the myself line) is not ownership.
	nodes := a + " 127.0.0.1:7001@17001 myself,master - 0 0 3 connected 0-5460 8943 [8943->-" + b + "] [9000-<-" + b + "]\n" +
		b + " 127.0.0.1:7002@17002 master - 0 0 3 connected 5461-8942 8944-16383\n" +
		"replicaOfB000000000000000000000000000000 127.0.0.1:7003@17003 slave " + b + " 0 0 3 connected\n"
	top, err := FromClusterNodes(nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := a + " 127.0.0.1 7001 master - 0-5460 8943\n" + b + " 127.0.0.1 7002 master - 5461-8942 8944-16383\n" +
		"replicaOfB000000000000000000000000000000 127.0.0.1 7003 slave " + b + "\n"
	if top.Text() != want {
		t.Fatalf("got\n%s", top.Text())
	}
	moved, err := top.WithSlot(8943, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := moved.Text(); got != a+" 127.0.0.1 7001 master - 0-5460\n"+b+" 127.0.0.1 7002 master - 5461-16383\n"+
		"replicaOfB000000000000000000000000000000 127.0.0.1 7003 slave "+b+"\n" {
		t.Errorf("moved:\n%s", got)
	}
	if top.Owner(8943).ID != a {
		t.Error("WithSlot changed the original")
	}
	if _, err := top.WithSlot(1, "replicaOfB000000000000000000000000000000"); err == nil {
		t.Error("a slot given to a replica")
	}
	if _, err := FromClusterNodes("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}
