package redis_tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startModelServer starts a server of its own (startServer) for one test
// and returns its address; the server is stopped at cleanup, and a crash
// or panic on its stderr fails the test.
func startModelServer(t *testing.T, args ...string) string {
	t.Helper()
	s, err := startServer(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s.addr
}

// TestGoRedisModels stores linear.onnx and runs it through go-redis v9
// speaking RESP3, and checks that AI.MODELINFO is a RESP3 map there.
func TestGoRedisModels(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("models", "linear.onnx"))
	if err != nil {
		t.Fatalf("linear.onnx not generated (run `make models`): %v", err)
	}
	addr := startModelServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3})
	defer rdb.Close()

	do := func(want any, args ...any) any {
		t.Helper()
		v, err := rdb.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args[:2], err)
		}
		if want != nil && !reflect.DeepEqual(v, want) {
			t.Fatalf("%v: got %#v, want %#v", args[:2], v, want)
		}
		return v
	}

	// redisai-py style: chunk size first (an integer), then a chunked upload.
	size := do(nil, "AI.CONFIG", "GET", "MODEL_CHUNK_SIZE")
	if size != int64(511<<20) {
		t.Fatalf("AI.CONFIG GET MODEL_CHUNK_SIZE = %#v, want int64 %d", size, 511<<20)
	}
	do("OK", "AI.MODELSTORE", "lin", "ONNX", "CPU", "TAG", "go", "BLOB", data[:1], data[1:100], data[100:])
	do("OK", "AI.TENSORSET", "x", "FLOAT", 2, 4, "VALUES", 1, 2, 3, 4, 5, 6, 7, 8)
	do("OK", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y", "TIMEOUT", 1000)

	vals, err := rdb.Do(ctx, "AI.TENSORGET", "y", "VALUES").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{7, 9, 11, 14.2, 17.8, 21.4}
	if len(vals) != len(want) {
		t.Fatalf("TENSORGET VALUES: %#v", vals)
	}
	for i, v := range vals {
		var f float64
		switch v := v.(type) {
		case float64: // RESP3 double
			f = v
		case string:
			if f, err = strconv.ParseFloat(v, 64); err != nil {
				t.Fatalf("value %d: %q", i, v)
			}
		default:
			t.Fatalf("value %d has type %T", i, v)
		}
		if math.Abs(f-float64(want[i])) > 1e-5 {
			t.Errorf("y[%d] = %v, want %v", i, f, want[i])
		}
	}

	info, ok := do(nil, "AI.MODELINFO", "lin").(map[any]any)
	if !ok {
		t.Fatalf("AI.MODELINFO under RESP3 is %T, want a map", info)
	}
	sum := sha256.Sum256(data)
	for k, w := range map[string]any{
		"key": "lin", "id": "", "sha256": hex.EncodeToString(sum[:]), "size": int64(len(data)),
		"backend": "ONNX", "device": "CPU", "tag": "go", "batchsize": int64(0), "minbatchsize": int64(0),
		"minbatchtimeout": int64(0), "optimize": int64(1), "shared_with": int64(0), "persist": int64(1),
		"weights": "copied", "owner": "default", "engine": "onnxruntime-worker",
		"inputs":  []any{map[any]any{"name": "x", "dtype": "FLOAT", "shape": []any{int64(-1), int64(4)}}},
		"outputs": []any{map[any]any{"name": "y", "dtype": "FLOAT", "shape": []any{int64(-1), int64(3)}}},
	} {
		if !reflect.DeepEqual(info[k], w) {
			t.Errorf("AI.MODELINFO %s = %#v, want %#v", k, info[k], w)
		}
	}
	if c, ok := info["created"].(int64); !ok || math.Abs(float64(c-time.Now().UnixMilli())) > 60_000 {
		t.Errorf("AI.MODELINFO created = %#v", info["created"])
	}
	if len(info) != 19 {
		t.Errorf("AI.MODELINFO has %d fields, want 19: %v", len(info), info)
	}

	// MODELGET META stays RedisAI's flat array of 16 items.
	meta, ok := do(nil, "AI.MODELGET", "lin", "META").([]any)
	if !ok || len(meta) != 16 || meta[5] != "go" {
		t.Errorf("AI.MODELGET META = %#v", meta)
	}
	if blob := do(nil, "AI.MODELGET", "lin", "BLOB"); blob != string(data) {
		t.Errorf("AI.MODELGET BLOB differs from the stored bytes")
	}
	stats, err := rdb.Do(ctx, "AI.INFO", "lin").Slice()
	if err != nil || len(stats) != 18 || stats[15] != int64(1) {
		t.Errorf("AI.INFO = %#v, %v (want 18 items, calls 1)", stats, err)
	}

	// Errors reach go-redis with their text.
	err = rdb.Do(ctx, "AI.MODELEXECUTE", "lin", "INPUTS", 1, "nosuch", "OUTPUTS", 1, "y").Err()
	var rerr redis.Error
	if !errors.As(err, &rerr) || err.Error() != "ERR tensor key is empty or in a different shard" {
		t.Errorf("MODELEXECUTE on a missing tensor: %v", err)
	}
	do("OK", "AI.MODELDEL", "lin")
	if err := rdb.Do(ctx, "AI.MODELINFO", "lin").Err(); err == nil || err.Error() != "ERR model key is empty" {
		t.Errorf("AI.MODELINFO after MODELDEL: %v", err)
	}
}
