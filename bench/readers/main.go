// Command readers measures why EnclaveAI reads RESP itself instead of with
// redcon's reader: the peak memory of reading one AI.MODELSTORE whose model
// comes in three BLOB chunks (500 MB each by default) through
// redcon.Reader.ReadCommand and through server.Reader with the Sink the
// server uses for model uploads.
//
//	go run ./bench/readers [-chunk 500000000] [-chunks 3]
//
// Each reader runs in a child process of its own, so each peak (VmHWM of
// /proc/self/status) is that reader's alone. The request is generated as it
// is read (it never exists whole in memory), and the bytes consumed are
// counted so both readers are shown to have read the same request.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/server"
	"github.com/tidwall/redcon"
)

func main() {
	chunk := flag.Int64("chunk", 500_000_000, "bytes per BLOB chunk")
	chunks := flag.Int("chunks", 3, "BLOB chunks")
	mode := flag.String("mode", "", "redcon or ours: measure in this process (used by the parent)")
	flag.Parse()
	if *mode != "" {
		if err := measure(*mode, *chunk, *chunks); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	model := float64(*chunk) * float64(*chunks)
	fmt.Printf("one AI.MODELSTORE with %d BLOB chunks of %d bytes (%.2f GB of model)\n", *chunks, *chunk, model/1e9)
	fmt.Printf("%-34s %12s %12s %10s\n", "reader", "peak RSS MB", "x model", "seconds")
	for _, m := range []string{"ours", "redcon"} {
		out, err := exec.Command(os.Args[0], "-mode", m, "-chunk", strconv.FormatInt(*chunk, 10),
			"-chunks", strconv.Itoa(*chunks)).CombinedOutput()
		if err != nil {
			fmt.Printf("%-34s failed: %v %s\n", m, err, strings.TrimSpace(string(out)))
			continue
		}
		var peak int64
		var secs float64
		fmt.Sscan(string(out), &peak, &secs)
		name := map[string]string{"ours": "server.Reader + upload Sink", "redcon": "redcon.Reader.ReadCommand"}[m]
		fmt.Printf("%-34s %12.0f %12.2f %10.2f\n", name, float64(peak)/1e6, float64(peak)/model, secs)
	}
}

// request streams `AI.MODELSTORE m ONNX CPU BLOB <chunk>...` without
// holding it: the chunks are zero bytes produced on demand.
type request struct {
	parts []io.Reader
}

func newRequest(chunk int64, chunks int) *request {
	head := fmt.Sprintf("*%d\r\n$13\r\nAI.MODELSTORE\r\n$1\r\nm\r\n$4\r\nONNX\r\n$3\r\nCPU\r\n$4\r\nBLOB\r\n", 5+chunks)
	r := &request{parts: []io.Reader{strings.NewReader(head)}}
	for range chunks {
		r.parts = append(r.parts, strings.NewReader("$"+strconv.FormatInt(chunk, 10)+"\r\n"),
			io.LimitReader(zeros{}, chunk), strings.NewReader("\r\n"))
	}
	return r
}

func (r *request) reader() io.Reader { return io.MultiReader(r.parts...) }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func measure(mode string, chunk int64, chunks int) error {
	in := &counter{r: newRequest(chunk, chunks).reader()}
	start := time.Now()
	var args int
	switch mode {
	case "redcon":
		cmd, err := redcon.NewReader(in).ReadCommand()
		if err != nil {
			return err
		}
		args = len(cmd.Args)
	case "ours":
		// What the server's upload Sink does: one buffer for the whole
		// model, filled from the socket chunk after chunk.
		model := make([]byte, 0, chunk*int64(chunks))
		lim := server.Limits{Limits: commands.Limits{MaxArgs: 1 << 20, MaxBulk: 512 << 20, MaxQuery: 1 << 30},
			Sink: func(a server.SinkArg) ([]byte, error) {
				if a.Index < 5 {
					return nil, nil
				}
				n := len(model)
				model = model[:n+int(a.Size)]
				return model[n:], nil
			}}
		cmd, err := server.NewReader(bufio.NewReader(in)).ReadCommand(lim, func([]byte) server.Limits { return lim })
		if err != nil {
			return err
		}
		args = len(cmd.Args)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	if args != 5+chunks {
		return fmt.Errorf("%s read %d arguments, want %d", mode, args, 5+chunks)
	}
	secs := time.Since(start).Seconds()
	peak, err := vmHWM()
	if err != nil {
		return err
	}
	fmt.Println(peak, secs)
	return nil
}

// vmHWM is the process's peak resident set, in bytes.
func vmHWM() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
