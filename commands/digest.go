package commands

import (
	"encoding/hex"
	"slices"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Running a model by its hash. A model's SHA-256 (AI.MODELINFO's sha256)
// names its exact bytes. AI.MODELFIND lists the caller's keys whose model
// has a digest; EXPECT on AI.MODELEXECUTE (and on a DAG's MODELEXECUTE)
// refuses to run unless the model under the key has it. The check is made
// on the model value the run then uses (values are immutable: a store onto
// the key replaces the value, never changes it), so a model replaced
// between AI.MODELFIND and the run is refused, never run.

func init() {
	register(&Spec{Name: "ai.modelfind", Arity: 2, Flags: Readonly | NoTxLock, Group: "models",
		Summary: "Lists the caller's model keys whose model has a SHA-256.",
		Syntax:  "sha256-hex", Parse: parseModelFind})
}

var (
	errBadDigest      = Reply("ERR a model digest is a SHA-256 in hex (64 digits)")
	errDigestMismatch = Reply("ERR EXPECT: the model under the key does not have the expected SHA-256")
)

// parseDigest reads a SHA-256 in hex, either case.
func parseDigest(b []byte) ([32]byte, error) {
	var d [32]byte
	if len(b) != 64 {
		return d, errBadDigest
	}
	if _, err := hex.Decode(d[:], b); err != nil {
		return d, errBadDigest
	}
	return d, nil
}

// modelDigest is m's SHA-256, waiting for it if a fresh upload's is still
// being computed; ok is false when the model went away meanwhile.
func modelDigest(m *modelstore.Model) (sum [32]byte, ok bool) {
	if !m.Blob.TryRetain() {
		return sum, false
	}
	defer m.Blob.Release()
	return m.Blob.SHA256()
}

// checkExpect refuses m unless its digest is want (nil: no EXPECT).
func checkExpect(m *modelstore.Model, want *[32]byte) error {
	if want == nil {
		return nil
	}
	if sum, ok := modelDigest(m); !ok || sum != *want {
		return errDigestMismatch
	}
	return nil
}

// parseModelFind: AI.MODELFIND sha256-hex. The reply is the sorted keys of
// the caller's models with that digest (empty when none). It walks the
// keyspace's models once.
func parseModelFind(a Args) (Runner, error) {
	want, err := parseDigest(a.Next())
	if err != nil {
		return nil, err
	}
	return modelFindCmd{want: want}, nil
}

// modelFindCmd is AI.MODELFIND sha256: the keys of the models with that digest.
type modelFindCmd struct{ want [32]byte }

// Run implements Runner.
func (c modelFindCmd) Run(x *Ctx) error {
	allow := x.allow()
	var keys []string
	for _, it := range x.Keys.Items() {
		m, ok := it.Value.(*modelstore.Model)
		if !ok || (allow != nil && allow(m) != nil) {
			continue
		}
		if sum, ok := modelDigest(m); ok && sum == c.want {
			keys = append(keys, it.Key)
		}
	}
	slices.Sort(keys)
	x.W.StringList(keys)
	return nil
}
