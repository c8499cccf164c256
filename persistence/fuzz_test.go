package persistence

import (
	"bytes"
	"os"
	"testing"
)

// fuzzMaxBlob bounds every allocation a fuzzed input can cause.
const fuzzMaxBlob = 1 << 20

// FuzzRead feeds damaged snapshots to Read: it must return an error, never
// panic, and never allocate beyond its limits. Seeded with the golden files.
//
//	go test -run '^$' -fuzz FuzzRead -fuzztime 60s -fuzzminimizetime 2s ./persistence
func FuzzRead(f *testing.F) {
	for _, path := range []string{goldenV1, goldenV2} {
		golden, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(golden)
		f.Add(golden[:headerSize+10])
	}
	f.Add(seal(f, &memSource{}, minFrameSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		Read(bytes.NewReader(b), testKey, fuzzMaxBlob, &memSink{})
	})
}

// FuzzDecodeRecords feeds arbitrary record streams to the decoder behind the
// cipher, which FuzzRead cannot reach: what a buggy writer holding the key
// could produce. Seeded with the golden content and the known bad streams.
//
//	go test -run '^$' -fuzz FuzzDecodeRecords -fuzztime 60s -fuzzminimizetime 2s ./persistence
func FuzzDecodeRecords(f *testing.F) {
	f.Add(plainRecords(f, goldenSource()))
	for _, bad := range badRecords(f) {
		f.Add(bad.plain)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeRecords(bytes.NewReader(b), formatVersion, fuzzMaxBlob, &memSink{})
	})
}

// FuzzDecodeFrame feeds arbitrary plaintexts to the log's record decoder
// behind the cipher (what a buggy writer holding the key could produce):
// it must return an error or apply the records, never panic nor allocate
// beyond its limit. Seeded with the golden log's records and a MODEL
// record naming its file by a random id.
//
//	go test -run '^$' -fuzz FuzzDecodeFrame -fuzztime 60s -fuzzminimizetime 2s ./persistence
func FuzzDecodeFrame(f *testing.F) {
	var seed []byte
	byID := Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "by-id", Optimize: true}, File: [32]byte{1}, Size: 5}}
	for _, op := range append(append(goldenLogBase(), goldenLogOps()...), byID) {
		var err error
		if seed, err = appendOp(seed, op); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeFrame(b, KindIncr, newLogState())
		decodeFrame(b, KindBase, newLogState())
	})
}
