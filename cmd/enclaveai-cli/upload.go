package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// upload: enclaveai-cli upload [flags] model.onnx. The file is streamed in
// chunks of the server's MODEL_CHUNK_SIZE (or -chunk), with a progress line
// on stderr; the server's SHA-256 of what it stored is checked against the
// file's.
func upload(args []string, out io.Writer) error {
	fs := newFlags("upload")
	var cf connFlags
	var pf policyFlags
	cf.register(fs)
	pf.register(fs, true)
	key := fs.String("key", "*", "key to store the model under (* for a new UUID, which is printed)")
	tag := fs.String("tag", "", "the model's TAG")
	chunk := fs.Int64("chunk", 0, "chunk size in bytes (0: the server's MODEL_CHUNK_SIZE)")
	noOpt := fs.Bool("no-optimize", false, "store with OPTIMIZE 0 (no ONNX Runtime graph optimisation)")
	quiet := fs.Bool("q", false, "no progress line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("upload takes one model file")
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	c, err := attested(&cf, &pf, out)
	if err != nil {
		return err
	}
	defer c.Close()
	if *chunk <= 0 {
		r, err := c.do("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE")
		if err != nil {
			return err
		}
		*chunk = r.Int()
	}
	n := max(1, (size+*chunk-1) / *chunk)
	words := []any{"AI.MODELSTORE", *key, "ONNX", "CPU"}
	if *tag != "" {
		words = append(words, "TAG", *tag)
	}
	opt := "1"
	if *noOpt {
		opt = "0"
	}
	words = append(words, "OPTIMIZE", opt, "BLOB")
	// The header announces words and chunks; the words are encoded alone
	// and their own array header dropped.
	head := fmt.Appendf(nil, "*%d\r\n", int64(len(words))+n)
	w := encode(nil, words...)
	head = append(head, w[len(fmt.Sprintf("*%d\r\n", len(words))):]...)
	if _, err := c.conn.Write(head); err != nil {
		return err
	}
	p := &progress{label: filepath.Base(path), total: size, start: time.Now(), quiet: *quiet, h: sha256.New()}
	buf := make([]byte, 4<<20)
	sent := int64(0)
	for range n {
		k := min(*chunk, size-sent)
		if _, err := c.conn.Write([]byte("$" + strconv.FormatInt(k, 10) + "\r\n")); err != nil {
			return err
		}
		if _, err := c.writeAll(io.TeeReader(io.LimitReader(f, k), p), buf); err != nil {
			return err
		}
		if _, err := c.conn.Write([]byte("\r\n")); err != nil {
			return err
		}
		sent += k
	}
	p.draw(true)
	reply, err := c.read()
	if err != nil {
		return err
	}
	elapsed := time.Since(p.start)
	id := *key
	if id == "*" {
		id = reply.String()
	}
	sum := hex.EncodeToString(p.h.Sum(nil))
	info, err := c.do("AI.MODELINFO", id)
	if err != nil {
		return err
	}
	if got := field(info, "sha256").String(); got != sum {
		return fmt.Errorf("the server holds sha256 %s, the file has %s", got, sum)
	}
	fmt.Fprintf(out, "stored %s: %s in %.2f s (%s/s), sha256 %s\n", id, mb(size), elapsed.Seconds(),
		mb(int64(float64(size)/max(elapsed.Seconds(), 1e-9))), sum)
	return nil
}

// progress counts the bytes sent, hashes them and draws a line on stderr
// at most every 200 ms.
type progress struct {
	label       string
	total, done int64
	start, last time.Time
	quiet       bool
	h           hash.Hash
}

func (p *progress) Write(b []byte) (int, error) {
	p.h.Write(b)
	p.done += int64(len(b))
	p.draw(false)
	return len(b), nil
}

func (p *progress) draw(final bool) {
	now := time.Now()
	if p.quiet || (!final && now.Sub(p.last) < 200*time.Millisecond) {
		return
	}
	p.last = now
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	rate := float64(p.done) / max(now.Sub(p.start).Seconds(), 1e-9)
	fmt.Fprintf(os.Stderr, "\rupload %s %5.1f%% %s / %s %s/s ", p.label, pct, mb(p.done), mb(p.total), mb(int64(rate)))
	if final {
		fmt.Fprintln(os.Stderr)
	}
}

// mb writes a byte count in B, kB, MB or GB.
func mb(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
