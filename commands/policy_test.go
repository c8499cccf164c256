package commands

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

// quotaHarness is a server with users alice and bob and
// max-model-bytes-per-user limit, and a client logged in as each.
func quotaHarness(t *testing.T, limit int64) (h, alice, bob *harness) {
	t.Helper()
	opts, err := config.Load([]string{"--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb"})
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxModelBytesPerUser.Store(limit)
	h = newHarnessOpts(t, opts)
	return h, h.login("alice", "pa"), h.login("bob", "pb")
}

// login is a new client of h's server authenticated as user.
func (h *harness) login(user, pass string) *harness {
	h.t.Helper()
	c := h.client("127.0.0.1:50100")
	c.run(row("AUTH "+user+" "+pass, "+OK"))
	return c
}

// startUpload is what the front end does on the length header of an
// AI.MODELSTORE's first chunk, of n bytes, onto key.
func (h *harness) startUpload(key string, n int64) (*Upload, error) {
	h.t.Helper()
	prev := words("AI.MODELSTORE " + key + " ONNX CPU BLOB")
	u, err := h.s.StartUpload(h.c, Commands().Lookup(prev[0]), prev)
	if err != nil {
		return nil, err
	}
	if err := u.Admit(n); err != nil {
		u.End()
		return nil, err
	}
	return u, nil
}

var quotaRefused = "-" + string(errUserModelBytes)

// doArgs runs one command of raw arguments (a model's bytes among them)
// and returns its reply rendered.
func (h *harness) doArgs(args ...string) string {
	argv := make([][]byte, len(args))
	for i, a := range args {
		argv[i] = []byte(a)
	}
	h.s.Dispatch(h.c, argv, nil)
	h.s.CommitClient(h.c)
	out := render(h.c.W.Bytes())
	h.c.W.Reset()
	return out
}

// Uploads in flight claim their chunks on their length headers: one
// user's uploads side by side, on two connections, are held to the
// limit together (each was checked against the models stored alone, and
// 16 at once stored 11 models against a limit of 1); a refused or
// cut-off upload gives its claim back; another user has a quota of its
// own; a resumable upload counts with the uploads in flight.
func TestQuotaClaimsUploadsInFlight(t *testing.T) {
	h, alice, bob := quotaHarness(t, 3000)
	alice2 := h.login("alice", "pa")
	u1, err := alice.startUpload("k1", 2000)
	if err != nil {
		t.Fatalf("the first upload: %v", err)
	}
	if _, err := alice2.startUpload("k2", 2000); err != errUserModelBytes {
		t.Errorf("a second upload of 2000 bytes beside the first: %v, want the quota's refusal", err)
	}
	u2, err := alice2.startUpload("k2", 1000)
	if err != nil {
		t.Fatalf("a second upload of 1000 bytes: %v", err)
	}
	if err := u2.Admit(1); err != errUserModelBytes {
		t.Errorf("its next chunk, past the limit: %v, want the quota's refusal", err)
	}
	alice.run(row("AI.UPLOAD BEGIN 1", quotaRefused))
	ub, err := bob.startUpload("b", 3000)
	if err != nil {
		t.Errorf("bob's upload: %v", err)
	}
	// Cut off, refused: the claims are given back.
	u1.End()
	u2.End()
	ub.End()
	id := strings.Trim(render(alice.do("AI.UPLOAD BEGIN 3000")), `"`)
	if _, err := alice2.startUpload("k2", 1); err != errUserModelBytes {
		t.Errorf("an upload beside a held resumable upload of the whole limit: %v, want the refusal", err)
	}
	alice.run(row("AI.UPLOAD ABORT "+id, "+OK"))
	u, err := alice2.startUpload("k2", 3000)
	if err != nil {
		t.Fatalf("the whole limit once every claim was given back: %v", err)
	}
	u.End()
}

// slowEngine compiles as its Engine does, after a pause: stores compiled
// side by side all pass the check made before compiling.
type slowEngine struct{ modelstore.Engine }

func (e slowEngine) Compile(src modelstore.ModelSource, opts modelstore.SessionOptions) (modelstore.EngineSession, error) {
	time.Sleep(50 * time.Millisecond)
	return e.Engine.Compile(src, opts)
}

// The store checks the quota again as the model enters the keyspace: of
// one user's stores compiled side by side, only those the limit holds
// are stored (all 8 were, each checked before its compile against the
// models stored then), and the other user stores on.
func TestQuotaHoldsStoresSideBySide(t *testing.T) {
	model := loadTestRuntime(t)
	if model == nil {
		t.Skip("no ONNX Runtime")
	}
	variant := func(i int) []byte { // a doc_string: bytes of their own
		return append(append([]byte(nil), model...), 0x32, 1, byte('a'+i))
	}
	size := int64(len(variant(0)))
	h, _, bob := quotaHarness(t, size*3/2)
	h.s.Models.SetEngine(slowEngine{h.s.Models.Engine()})
	const n = 8
	clients := make([]*harness, n)
	for i := range clients {
		clients[i] = h.login("alice", "pa")
	}
	replies := make([]string, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = c.doArgs("AI.MODELSTORE", fmt.Sprint("m", i), "ONNX", "CPU", "BLOB", string(variant(i)))
		}()
	}
	wg.Wait()
	stored := 0
	for i, r := range replies {
		switch r {
		case "+OK":
			stored++
		case quotaRefused:
		default:
			t.Errorf("store %d: %s", i, r)
		}
	}
	if stored != 1 {
		t.Errorf("%d of alice's stores side by side stored, want 1: %v", stored, replies)
	}
	if got := bob.doArgs("AI.MODELSTORE", "b", "ONNX", "CPU", "BLOB", string(model)); got != "+OK" {
		t.Errorf("bob's store: %s", got)
	}
}

// A resumable upload's announced size counts against a BLOB store, and a
// store from the upload takes its claim: it is not counted twice.
func TestQuotaCountsHeldUploads(t *testing.T) {
	model := loadTestRuntime(t)
	if model == nil {
		t.Skip("no ONNX Runtime")
	}
	size := len(model)
	_, alice, _ := quotaHarness(t, int64(size+100))
	store := func(want string) {
		t.Helper()
		if got := alice.doArgs("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", string(model)); got != want {
			t.Errorf("AI.MODELSTORE m ... BLOB: %s, want %s", got, want)
		}
	}
	id := strings.Trim(render(alice.do(fmt.Sprint("AI.UPLOAD BEGIN ", size))), `"`)
	store(quotaRefused)
	if got := alice.doArgs("AI.UPLOAD", "APPEND", id, "0", "BLOB", string(model)); got != fmt.Sprint(":", size) {
		t.Fatalf("AI.UPLOAD APPEND: %s", got)
	}
	alice.run(
		row("AI.MODELSTORE u ONNX CPU UPLOAD "+id, "+OK"),
		row("AI.UPLOAD BEGIN 101", quotaRefused),
		row("AI.MODELDEL u", "+OK"),
	)
	store("+OK")
}
