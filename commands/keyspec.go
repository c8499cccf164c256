package commands

// Key positions of the commands whose keys move with their arguments
// (Spec.Keys), matching RedisAI's getkeys-api callbacks: the cluster
// router and COMMAND GETKEYS use them. Each walks the arguments as the
// command's parser does but never fails: a malformed command gets the
// keys found before the fault, and its parse reports the fault.

// countedKeys appends the n keys after argv[i] (the count) and returns the
// index after them; ok is false when the count is not a count.
func countedKeys(argv [][]byte, i int, out []int) ([]int, int, bool) {
	if i >= len(argv) {
		return out, i, false
	}
	n, ok := parseInt(argv[i])
	if !ok || n < 0 {
		return out, i, false
	}
	i++
	for ; n > 0 && i < len(argv); n-- {
		out = append(out, i)
		i++
	}
	return out, i, true
}

// modelExecuteKeys: AI.MODELEXECUTE key INPUTS n in... OUTPUTS m out...:
// the model, every input and every output.
func modelExecuteKeys(argv [][]byte) []int {
	out, i := []int{1}, 2
	for _, word := range []string{"INPUTS", "OUTPUTS"} {
		if i >= len(argv) || !isWord(argv[i], word) {
			return out
		}
		var ok bool
		if out, i, ok = countedKeys(argv, i+1, out); !ok {
			return out
		}
	}
	return out
}

// modelRunKeys: AI.MODELRUN key [TIMEOUT t] INPUTS in... OUTPUTS out...
func modelRunKeys(argv [][]byte) []int {
	out, i := []int{1}, 2
	if i < len(argv) && isWord(argv[i], "TIMEOUT") {
		i += 2
	}
	if i >= len(argv) || !isWord(argv[i], "INPUTS") {
		return out
	}
	for i++; i < len(argv); i++ {
		if !isWord(argv[i], "OUTPUTS") {
			out = append(out, i)
		}
	}
	return out
}

// dagKeys: the LOAD and PERSIST keys, the ROUTING value and the model key
// of each AI.MODELEXECUTE (AI.MODELRUN in AI.DAGRUN) op. Tensor names
// local to the DAG are not keys.
func dagKeys(argv [][]byte) []int {
	var out []int
	i := 1
	for i < len(argv) && !isWord(argv[i], "|>") {
		switch {
		case isWord(argv[i], "LOAD"), isWord(argv[i], "PERSIST"):
			var ok bool
			if out, i, ok = countedKeys(argv, i+1, out); !ok {
				return out
			}
		case isWord(argv[i], "ROUTING"):
			if i+1 < len(argv) {
				out = append(out, i+1)
			}
			i += 2
		case isWord(argv[i], "TIMEOUT"), isWord(argv[i], "RECEIPT"):
			i += 2
		default:
			return out
		}
	}
	for ; i+2 < len(argv); i++ {
		if isWord(argv[i], "|>") && (isWord(argv[i+1], "AI.MODELEXECUTE") || isWord(argv[i+1], "AI.MODELRUN")) {
			out = append(out, i+2)
		}
	}
	return out
}
