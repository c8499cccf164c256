package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The syntax of directive values and lines, shared by the configuration
// file, --flags, CONFIG SET and the command-line splitting that
// redis-cli-style tools and tests use: save rules, yes/no, memory sizes
// with Redis's units, and sdssplitargs quoting.

// SaveRule is one `save <seconds> <changes>` pair.
type SaveRule struct{ Seconds, Changes int64 }

// ParseSaveRules parses "3600 1 300 100"; "" means no automatic snapshots.
func ParseSaveRules(s string) ([]SaveRule, error) {
	f := strings.Fields(s)
	if len(f)%2 != 0 {
		return nil, errors.New("save needs pairs of <seconds> <changes>")
	}
	rules := make([]SaveRule, 0, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		sec, err1 := strconv.ParseInt(f[i], 10, 64)
		ch, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || sec < 1 || ch < 1 {
			return nil, fmt.Errorf("invalid save rule %q %q", f[i], f[i+1])
		}
		rules = append(rules, SaveRule{sec, ch})
	}
	return rules, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func parseYesNo(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, errors.New("argument must be 'yes' or 'no'")
}

// ParseMemory parses a size with Redis units: 1k=1000, 1kb=1024, m/mb, g/gb.
func ParseMemory(s string) (int64, error) {
	l := strings.ToLower(s)
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}} {
		if strings.HasSuffix(l, u.suffix) {
			l, mul = strings.TrimSuffix(l, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(l, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-") {
		return 0, fmt.Errorf("invalid memory value %q", s)
	}
	if n > (1<<63-1)/mul {
		return 0, fmt.Errorf("memory value %q overflows", s)
	}
	return n * mul, nil
}

// SplitArgs splits a line into arguments like Redis's sdssplitargs: spaces
// separate, "double quotes" take \n \r \t \b \a \" \\ and \xHH escapes,
// 'single quotes' take \' only. A quote may open in the middle of an
// argument (a"b c" is one argument, ab c); a closing quote must be followed
// by white space or the end. As in C, a NUL byte ends the line.
func SplitArgs(line string) ([]string, error) {
	if j := strings.IndexByte(line, 0); j >= 0 {
		line = line[:j]
	}
	errUnbalanced := errors.New("unbalanced quotes")
	var out []string
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i >= len(line) {
			return out, nil
		}
		cur := []byte{}
		inq, insq := false, false
		for done := false; !done; i++ {
			switch {
			case inq:
				if i >= len(line) {
					return nil, errUnbalanced
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					v, _ := strconv.ParseUint(line[i+2:i+4], 16, 8)
					cur = append(cur, byte(v))
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch c = line[i]; c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				case c == '"':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, errUnbalanced
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case insq:
				if i >= len(line) {
					return nil, errUnbalanced
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case c == '\'':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, errUnbalanced
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case i >= len(line):
				done = true
			default:
				switch c := line[i]; c {
				case ' ', '\n', '\r', '\t':
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
		}
		out = append(out, string(cur))
	}
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
