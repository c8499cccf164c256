package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tidwall/redcon"
)

// upload: enclaveai-cli upload [flags] model.onnx. The file is streamed in
// chunks of the server's MODEL_CHUNK_SIZE (or -chunk), with a progress line
// on stderr; the server's SHA-256 of what it stored is checked against the
// file's.
func upload(args []string, out io.Writer) error {
	fs := newFlags("upload")
	var cf connFlags
	var pf policyFlags
	cf.register(fs, true, "cert-key") // -key is the model's key
	pf.register(fs, true)
	key := fs.String("key", "*", "key to store the model under (* for a new UUID, which is printed)")
	tag := fs.String("tag", "", "the model's TAG")
	chunk := fs.Int64("chunk", 0, "chunk size in bytes (0: the server's MODEL_CHUNK_SIZE)")
	noOpt := fs.Bool("no-optimize", false, "store with OPTIMIZE 0 (no ONNX Runtime graph optimisation)")
	quiet := fs.Bool("q", false, "no progress line")
	resume := fs.Bool("resume", false, "upload through a resumable AI.UPLOAD: when it is cut off, the same command again goes on from the bytes the server holds (the upload's id is kept in <file>.upload until it is stored)")
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
	words := []any{"AI.MODELSTORE", *key, "ONNX", "CPU"}
	if *tag != "" {
		words = append(words, "TAG", *tag)
	}
	opt := "1"
	if *noOpt {
		opt = "0"
	}
	words = append(words, "OPTIMIZE", opt)
	p := &progress{label: filepath.Base(path), total: size, start: time.Now(), quiet: *quiet, h: sha256.New()}
	var reply redcon.RESP
	if *resume {
		reply, err = uploadResumable(c, f, st, path+".upload", *chunk, words, p, out)
	} else {
		reply, err = uploadOnce(c, f, size, *chunk, words, p)
	}
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
		mb(int64(float64(size-p.skipped)/max(elapsed.Seconds(), 1e-9))), sum)
	return nil
}

// uploadOnce sends the model as one AI.MODELSTORE whose BLOB chunks are
// streamed from the file, and returns its reply.
func uploadOnce(c *client, f io.Reader, size, chunk int64, words []any, p *progress) (redcon.RESP, error) {
	n := max(1, (size+chunk-1)/chunk)
	words = append(words, "BLOB")
	if _, err := c.conn.Write(header(n, words...)); err != nil {
		return redcon.RESP{}, err
	}
	buf := make([]byte, 4<<20)
	sent := int64(0)
	for range n {
		k := min(chunk, size-sent)
		if err := c.sendChunk(f, k, p, buf); err != nil {
			return redcon.RESP{}, err
		}
		sent += k
	}
	p.draw(true)
	return c.read()
}

// header encodes a command's words, announcing chunks more arguments
// after them: the words are encoded alone and their own array header
// replaced.
func header(chunks int64, words ...any) []byte {
	head := fmt.Appendf(nil, "*%d\r\n", int64(len(words))+chunks)
	w := encode(nil, words...)
	return append(head, w[len(fmt.Sprintf("*%d\r\n", len(words))):]...)
}

// sendChunk streams the next k bytes of f as one bulk string.
func (c *client) sendChunk(f io.Reader, k int64, p *progress, buf []byte) error {
	if _, err := c.conn.Write([]byte("$" + strconv.FormatInt(k, 10) + "\r\n")); err != nil {
		return err
	}
	if _, err := c.writeAll(io.TeeReader(io.LimitReader(f, k), p), buf); err != nil {
		return err
	}
	_, err := c.conn.Write([]byte("\r\n"))
	return err
}

// resumeState is what <file>.upload keeps of a resumable upload in
// progress: its id, and the size and modification time of the file it
// came from, so that a changed file starts over.
type resumeState struct {
	ID    string `json:"id"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
}

// uploadResumable sends the model through AI.UPLOAD, one APPEND per chunk,
// then stores it with AI.MODELSTORE ... UPLOAD id, and returns that reply.
// It goes on from where an earlier run with the same state file was cut
// off, if the server still holds that upload.
func uploadResumable(c *client, f *os.File, st os.FileInfo, statePath string, chunk int64, words []any, p *progress, out io.Writer) (redcon.RESP, error) {
	size := st.Size()
	want := resumeState{Size: size, MTime: st.ModTime().UnixNano()}
	held := int64(0)
	var s resumeState
	if b, err := os.ReadFile(statePath); err == nil && json.Unmarshal(b, &s) == nil && s.ID != "" &&
		s.Size == want.Size && s.MTime == want.MTime {
		// Until the server sees the cut-off connection close, the upload
		// is still receiving on it: wait for that, a while.
		for wait := 0; wait < 300; wait++ {
			r, err := c.do("AI.UPLOAD", "STATUS", s.ID)
			if err != nil || len(items(r)) < 4 || int64(items(r)[0].Int()) != size {
				break
			}
			if items(r)[3].Int() == 0 {
				want.ID, held = s.ID, int64(items(r)[1].Int())
				break
			}
			if wait == 0 {
				fmt.Fprintf(out, "upload %s is still receiving on the connection that was cut off: waiting for the server to close it\n", s.ID)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if want.ID == "" {
		r, err := c.do("AI.UPLOAD", "BEGIN", size)
		if err != nil {
			return redcon.RESP{}, err
		}
		want.ID = r.String()
		b, _ := json.Marshal(want)
		if err := os.WriteFile(statePath, b, 0o600); err != nil {
			return redcon.RESP{}, err
		}
	} else {
		fmt.Fprintf(out, "resuming upload %s at %s of %s\n", want.ID, mb(held), mb(size))
	}
	// The bytes the server holds are hashed from the file, not sent.
	if _, err := io.CopyN(p.h, f, held); err != nil {
		return redcon.RESP{}, err
	}
	p.done, p.skipped = held, held
	buf := make([]byte, 4<<20)
	for held < size {
		k := min(chunk, size-held)
		if _, err := c.conn.Write(header(1, "AI.UPLOAD", "APPEND", want.ID, held, "BLOB")); err != nil {
			return redcon.RESP{}, err
		}
		if err := c.sendChunk(f, k, p, buf); err != nil {
			return redcon.RESP{}, err
		}
		r, err := c.read()
		if err != nil {
			return redcon.RESP{}, err
		}
		if int64(r.Int()) != held+k {
			return redcon.RESP{}, fmt.Errorf("the server holds %d bytes of the upload, expected %d", r.Int(), held+k)
		}
		held += k
	}
	p.draw(true)
	r, err := c.do(append(words, "UPLOAD", want.ID)...)
	if err != nil {
		return r, err
	}
	os.Remove(statePath)
	return r, nil
}

// progress counts the bytes sent, hashes them and draws a line on stderr
// at most every 200 ms.
type progress struct {
	label       string
	total, done int64
	skipped     int64 // bytes a resumed upload did not send again
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
