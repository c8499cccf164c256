package commands

import (
	"crypto/subtle"
	"maps"
	"slices"
	"strings"
	"time"
)

func init() {
	register(
		&Spec{Name: "ping", Arity: -1, Flags: Fast, Group: "connection",
			Summary: "Returns the server's liveliness response.", Syntax: "[message]", Parse: parsePing},
		&Spec{Name: "echo", Arity: 2, Flags: Fast | LoadingOK, Group: "connection",
			Summary: "Returns the given string.", Syntax: "message", Parse: parseEcho},
		&Spec{Name: "hello", Arity: -1, Flags: Fast | NoAuth | LoadingOK, Group: "connection",
			Summary: "Handshakes with the server: protocol version, authentication, client name.",
			Syntax:  "[protover [AUTH username password] [SETNAME clientname]]", Parse: parseHello},
		&Spec{Name: "auth", Arity: -2, Flags: Fast | NoAuth | LoadingOK, Group: "connection",
			Summary: "Authenticates the connection.", Syntax: "[username] password", Parse: parseAuth},
		&Spec{Name: "client", Arity: -2, Flags: LoadingOK, Group: "connection",
			Summary: "Client connection management: ID, SETNAME, GETNAME, SETINFO, INFO, LIST, KILL, REPLY.",
			Parse:   parseClient, AdminSubs: []string{"KILL", "LIST", "NO-EVICT"}, Subs: []Sub{
				{"ID", "This connection's id."},
				{"GETNAME", "This connection's name."},
				{"SETNAME <name>", "Names this connection."},
				{"SETINFO LIB-NAME|LIB-VER <value>", "Records the client library's name or version (CLIENT LIST shows them)."},
				{"INFO", "This connection, as a CLIENT LIST line."},
				{"LIST [TYPE <type> | ID <id> [<id> ...]]", "Every connection, or those of a type (all are normal) or with these ids, one line each."},
				{"KILL <ip:port>", "Closes the connection from this address."},
				{"KILL <option> <value> [<option> <value> ...]", "Closes the connections that match every filter: ID, ADDR, LADDR, USER, TYPE, MAXAGE, SKIPME yes|no."},
				{"REPLY ON|OFF|SKIP", "Turns this connection's replies on, off, or off for the next command."},
				{"NO-EVICT ON|OFF", "Accepted (nothing evicts clients)."},
				{"NO-TOUCH ON|OFF", "Accepted (keys have no access time)."},
			}},
		&Spec{Name: "acl", Arity: -2, Flags: LoadingOK, Group: "connection",
			Summary: "Users: WHOAMI (this connection's user), USERS (every user name).",
			Parse:   parseACL, AdminSubs: []string{"USERS"}, Subs: []Sub{
				{"WHOAMI", "This connection's user."},
				{"USERS", "Every user's name."},
			}},
		&Spec{Name: "select", Arity: 2, Flags: Fast | LoadingOK, Group: "connection",
			Summary: "Selects the database; only database 0 exists.", Syntax: "index", Parse: parseSelect},
		&Spec{Name: "quit", Arity: -1, Flags: Fast | NoAuth | LoadingOK | txControl, Group: "connection",
			Summary: "Closes the connection.", Parse: parseQuit},
		&Spec{Name: "reset", Arity: 1, Flags: Fast | NoAuth | LoadingOK | txControl, Group: "connection",
			Summary: "Resets the connection: protocol, name, authentication, transaction.", Parse: parseReset},
	)
}

func parsePing(a Args) (Runner, error) {
	switch a.Len() {
	case 0:
		return pongCmd{}, nil
	case 1:
		msg := a.Keep(1)
		return pingCmd{msg: msg}, nil
	}
	return nil, errorf("ERR wrong number of arguments for 'ping' command")
}

// pingCmd is PING message.
type pingCmd struct{ msg []byte }

// Run implements Runner.
func (c pingCmd) Run(x *Ctx) error {
	x.W.Bulk(c.msg)
	return nil
}

// pongCmd is PING.
type pongCmd struct{}

// Run implements Runner.
func (pongCmd) Run(x *Ctx) error {
	x.W.Simple("PONG")
	return nil
}

func parseEcho(a Args) (Runner, error) {
	msg := a.Keep(1)
	return echoCmd{msg: msg}, nil
}

// echoCmd is ECHO message.
type echoCmd struct{ msg []byte }

// Run implements Runner.
func (c echoCmd) Run(x *Ctx) error {
	x.W.Bulk(c.msg)
	return nil
}

// checkPassword checks a user's password in constant time: the default
// user's is requirepass, the others' come from `user` directives. As in
// Redis, without requirepass the default user takes any password, but the
// one-argument (legacy) AUTH is refused.
func checkPassword(x *Ctx, user, pass string, legacy bool) error {
	want := *x.Opts.Requirepass.Load()
	if user != "default" {
		if u := x.Opts.Users[user]; u != nil && u.Check(pass) {
			return nil
		}
		return errWrongPass
	}
	if want == "" && legacy {
		return Reply("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	if want != "" && subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
		return errWrongPass
	}
	return nil
}

// parseAuth: AUTH [username] password. The password may be a token
// (jwt.go).
func parseAuth(a Args) (Runner, error) {
	user := ""
	switch a.Len() {
	case 1:
	case 2:
		user = a.NextString()
	default:
		return nil, errSyntax
	}
	pass := a.NextString()
	return authCmd{user: user, pass: pass}, nil
}

// authCmd is AUTH [user] password (user empty: the default user).
type authCmd struct {
	user string
	pass string
}

// Run implements Runner.
func (c authCmd) Run(x *Ctx) error {
	l, err := authenticate(x, c.user, c.pass)
	if err != nil {
		return err
	}
	x.C.login(l)
	x.W.OK()
	return nil
}

type helloCmd struct {
	proto      int
	auth       bool
	user, pass string
	setName    bool
	name       string
}

func parseHello(a Args) (Runner, error) {
	h := &helloCmd{}
	if a.More() {
		v, ok := parseInt(a.Next())
		if !ok {
			return nil, Reply("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return nil, Reply("NOPROTO unsupported protocol version")
		}
		h.proto = int(v)
	}
	for a.More() {
		opt := a.Pos()
		switch {
		case a.Match("AUTH") && a.Remaining() >= 2:
			h.auth, h.user, h.pass = true, a.NextString(), a.NextString()
		case a.Match("SETNAME") && a.Remaining() >= 1:
			h.setName, h.name = true, a.NextString()
			if !validClientName(h.name) {
				return nil, errBadClientName
			}
		default:
			return nil, errorf("ERR Syntax error in HELLO option '%s'", a.V[opt])
		}
	}
	return h, nil
}

// Run implements Runner.
func (h *helloCmd) Run(x *Ctx) error {
	if h.auth {
		l, err := authenticate(x, h.user, h.pass)
		if err != nil {
			return err
		}
		x.C.login(l)
	}
	if !x.C.Authed() {
		return Reply("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	if h.proto != 0 {
		x.C.setProto(h.proto)
	}
	if h.setName {
		x.C.mu.Lock()
		x.C.name = h.name
		x.C.mu.Unlock()
	}
	w := x.W
	w.Map(7)
	w.BulkString("server")
	w.BulkString("redis")
	w.BulkString("version")
	w.BulkString(RedisVersion)
	w.BulkString("proto")
	w.Int(int64(w.proto))
	w.BulkString("id")
	w.Int(x.C.ID)
	w.BulkString("mode")
	w.BulkString(x.redisMode())
	w.BulkString("role")
	w.BulkString("master")
	w.BulkString("modules")
	writeModules(w)
	return nil
}

var errBadClientName = Reply("ERR Client names cannot contain spaces, newlines or special characters.")

func validClientName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

func parseSelect(a Args) (Runner, error) {
	n, ok := parseInt(a.Next())
	if !ok {
		return nil, errNotInteger
	}
	if n != 0 {
		return nil, Reply("ERR DB index is out of range")
	}
	return selectCmd{}, nil
}

// selectCmd is SELECT 0, the only database.
type selectCmd struct{}

// Run implements Runner.
func (selectCmd) Run(x *Ctx) error {
	x.W.OK()
	return nil
}

func parseQuit(a Args) (Runner, error) {
	return quitCmd{}, nil
}

// quitCmd is QUIT.
type quitCmd struct{}

// Run implements Runner.
func (quitCmd) Run(x *Ctx) error {
	x.C.closeAfter = true
	x.W.OK()
	return nil
}

func parseReset(a Args) (Runner, error) {
	return resetCmd{}, nil
}

// resetCmd is RESET.
type resetCmd struct{}

// Run implements Runner.
func (resetCmd) Run(x *Ctx) error {
	c := x.C
	x.endMulti(c).release()
	c.setProto(2)
	c.mu.Lock()
	c.name, c.user = "", "default"
	c.mu.Unlock()
	c.authed, c.authUntil = *x.Opts.Requirepass.Load() == "", 0
	x.stopMonitor(c)              // as Redis: RESET ends MONITOR mode
	if c.reply != replySkipThis { // as Redis: a skipped RESET stays skipped
		c.setReply(replyOn)
	}
	x.W.Simple("RESET")
	return nil
}

// subArity is the wrong argument count of CLIENT's subcommand sub.
func subArity(sub string) error { return subArityOf("client", sub) }

func parseClient(a Args) (Runner, error) {
	sub := strings.ToUpper(a.NextString())
	n := a.Remaining()
	switch sub {
	case "ID":
		if n != 0 {
			return nil, subArity(sub)
		}
		return clientIDCmd{}, nil
	case "GETNAME":
		if n != 0 {
			return nil, subArity(sub)
		}
		return clientGetNameCmd{}, nil
	case "SETNAME":
		if n != 1 {
			return nil, subArity(sub)
		}
		name := a.NextString()
		if !validClientName(name) {
			return nil, errBadClientName
		}
		return clientSetNameCmd{name: name}, nil
	case "SETINFO":
		if n != 2 {
			return nil, subArity(sub)
		}
		typed, val := a.NextString(), a.NextString()
		attr := strings.ToUpper(typed)
		if attr != "LIB-NAME" && attr != "LIB-VER" {
			return nil, errorf("ERR Unrecognized option '%s'", typed)
		}
		if !validClientName(val) {
			return nil, errorf("ERR %s cannot contain spaces, newlines or special characters.", typed)
		}
		return clientSetInfoCmd{attr: attr, val: val}, nil
	case "INFO":
		if n != 0 {
			return nil, subArity(sub)
		}
		return clientInfoCmd{}, nil
	case "LIST":
		return parseClientList(a)
	case "KILL":
		if n == 0 {
			return nil, subArity(sub)
		}
		return parseClientKill(a)
	case "REPLY":
		if n != 1 {
			return nil, subArity(sub)
		}
		mode, ok := map[string]replyMode{"ON": replyOn, "OFF": replyOff, "SKIP": replySkipNext}[strings.ToUpper(a.NextString())]
		if !ok {
			return nil, errSyntax
		}
		return clientReplyCmd{mode: mode}, nil
	case "NO-EVICT", "NO-TOUCH":
		if n != 1 {
			return nil, subArity(sub)
		}
		if v := a.NextString(); !strings.EqualFold(v, "on") && !strings.EqualFold(v, "off") {
			return nil, errSyntax
		}
		return clientNoopCmd{}, nil
	}
	return nil, unknownSub("client", a.V[1])
}

// clientReplyCmd is CLIENT REPLY ON | OFF | SKIP (mode replyOn, replyOff,
// replySkipNext). As Redis's, only ON answers, and SKIP is ignored while
// replies are off.
type clientReplyCmd struct{ mode replyMode }

// Run implements Runner.
func (c clientReplyCmd) Run(x *Ctx) error {
	switch {
	case c.mode == replyOn:
		x.C.setReply(replyOn)
		x.W.OK()
	case c.mode == replySkipNext && x.C.reply == replyOff:
	default:
		x.C.setReply(c.mode)
	}
	return nil
}

// clientNoopCmd is CLIENT NO-EVICT | NO-TOUCH on | off, accepted (nothing is evicted or touched).
type clientNoopCmd struct{}

// Run implements Runner.
func (clientNoopCmd) Run(x *Ctx) error {
	x.W.OK()
	return nil
}

// clientInfoCmd is CLIENT INFO.
type clientInfoCmd struct{}

// Run implements Runner.
func (clientInfoCmd) Run(x *Ctx) error {
	x.W.Verbatim(x.clientInfo(x.C) + "\n")
	return nil
}

// clientSetInfoCmd is CLIENT SETINFO LIB-NAME | LIB-VER value.
type clientSetInfoCmd struct {
	attr string
	val  string
}

// Run implements Runner.
func (c clientSetInfoCmd) Run(x *Ctx) error {
	x.C.mu.Lock()
	if c.attr == "LIB-NAME" {
		x.C.libName = c.val
	} else {
		x.C.libVer = c.val
	}
	x.C.mu.Unlock()
	x.W.OK()
	return nil
}

// clientSetNameCmd is CLIENT SETNAME name.
type clientSetNameCmd struct{ name string }

// Run implements Runner.
func (c clientSetNameCmd) Run(x *Ctx) error {
	x.C.mu.Lock()
	x.C.name = c.name
	x.C.mu.Unlock()
	x.W.OK()
	return nil
}

// clientGetNameCmd is CLIENT GETNAME.
type clientGetNameCmd struct{}

// Run implements Runner.
func (clientGetNameCmd) Run(x *Ctx) error {
	x.C.mu.Lock()
	name := x.C.name
	x.C.mu.Unlock()
	if name == "" {
		x.W.Null()
	} else {
		x.W.BulkString(name)
	}
	return nil
}

// clientIDCmd is CLIENT ID.
type clientIDCmd struct{}

// Run implements Runner.
func (clientIDCmd) Run(x *Ctx) error {
	x.W.Int(x.C.ID)
	return nil
}

func parseClientList(a Args) (Runner, error) {
	// As Redis 7.0: TYPE t alone, or ID followed by ids only.
	switch {
	case a.Remaining() == 0:
		return clientListCmd{}, nil
	case a.Remaining() == 2 && a.Match("TYPE"):
		switch t := a.NextString(); strings.ToLower(t) {
		case "normal": // every client here: no replicas, masters or subscribers
			return clientListCmd{}, nil
		case "master", "replica", "slave", "pubsub":
			return clientListCmd{ids: map[int64]bool{}}, nil
		default:
			return nil, errorf("ERR Unknown client type '%s'", t)
		}
	case a.Remaining() > 1 && a.Match("ID"):
		ids := map[int64]bool{}
		for a.More() {
			id, ok := parseInt(a.Next())
			if !ok {
				return nil, Reply("ERR Invalid client ID")
			}
			ids[id] = true // 0 or less matches no client
		}
		return clientListCmd{ids: ids}, nil
	}
	return nil, errSyntax
}

// clientListCmd is CLIENT LIST [TYPE type | ID id ...]: ids nil for every
// client.
type clientListCmd struct{ ids map[int64]bool }

// Run implements Runner.
func (c clientListCmd) Run(x *Ctx) error {
	var b strings.Builder
	for _, cl := range x.ClientList() {
		if c.ids == nil || c.ids[cl.ID] {
			b.WriteString(x.clientInfo(cl))
			b.WriteByte('\n')
		}
	}
	x.W.Verbatim(b.String())
	return nil
}

func parseClientKill(a Args) (Runner, error) {
	if a.Remaining() == 1 { // legacy form: CLIENT KILL addr:port
		addr := a.NextString()
		return clientKillAddrCmd{addr: addr}, nil
	}
	var id, maxAge int64
	var addr, laddr, user, typ string
	skipMe := true
	for a.More() {
		if a.Remaining() < 2 {
			return nil, errSyntax
		}
		opt, val := strings.ToUpper(a.NextString()), a.NextString()
		switch opt {
		case "ID":
			n, ok := parseInt([]byte(val))
			if !ok || n <= 0 {
				return nil, Reply("ERR client-id should be greater than 0")
			}
			id = n
		case "ADDR":
			addr = val
		case "LADDR":
			laddr = val
		case "SKIPME":
			switch strings.ToLower(val) {
			case "yes":
				skipMe = true
			case "no":
				skipMe = false
			default:
				return nil, errSyntax
			}
		case "TYPE":
			// Every client here is a normal one: there are no replicas,
			// masters or pub/sub clients (and, as in Redis, a MONITOR
			// client is normal).
			typ = strings.ToLower(val)
			switch typ {
			case "normal", "master", "replica", "slave", "pubsub":
			default:
				return nil, errorf("ERR Unknown client type '%s'", val)
			}
		case "USER":
			user = val
		case "MAXAGE":
			n, ok := parseInt([]byte(val))
			if !ok || n < 0 {
				return nil, errSyntax
			}
			maxAge = n
		default:
			return nil, errSyntax
		}
	}
	return clientKillCmd{id: id, addr: addr, laddr: laddr, user: user, typ: typ, maxAge: maxAge, skipMe: skipMe}, nil
}

// clientKillCmd is CLIENT KILL [ID id] [ADDR addr] [LADDR addr] [USER name]
// [TYPE type] [MAXAGE seconds] [SKIPME yes | no]: the clients every given
// filter matches (the zero values match any client).
type clientKillCmd struct {
	id     int64
	addr   string
	laddr  string
	user   string
	typ    string
	maxAge int64
	skipMe bool
}

// Run implements Runner.
func (c clientKillCmd) Run(x *Ctx) error {
	// A token (JWT) may name any user: only without tokens is a name that
	// no user directive configures unknown.
	if c.user != "" && c.user != "default" && x.Opts.Users[c.user] == nil && x.Opts.JWTPublicKeyFile == "" {
		return errorf("ERR No such user '%s'", c.user)
	}
	if c.typ != "" && c.typ != "normal" {
		x.W.Int(0)
		return nil
	}
	now := time.Now()
	killed := 0
	for _, cl := range x.ClientList() {
		if (c.id != 0 && cl.ID != c.id) || (c.addr != "" && cl.Addr != c.addr) || (c.laddr != "" && cl.LAddr != c.laddr) {
			continue
		}
		if c.user != "" && cl.User() != c.user {
			continue
		}
		if c.maxAge > 0 && int64(now.Sub(cl.created).Seconds()) <= c.maxAge { // older than maxAge only
			continue
		}
		if c.skipMe && cl == x.C {
			continue
		}
		x.killClient(cl)
		killed++
	}
	x.W.Int(int64(killed))
	return nil
}

// clientKillAddrCmd is CLIENT KILL addr:port, the legacy form.
type clientKillAddrCmd struct{ addr string }

// Run implements Runner.
func (c clientKillAddrCmd) Run(x *Ctx) error {
	for _, cl := range x.ClientList() {
		if cl.Addr == c.addr {
			x.killClient(cl)
			x.W.OK()
			return nil
		}
	}
	return Reply("ERR No such client")
}

// killClient closes c; when c is the caller, only after its reply is sent.
func (x *Ctx) killClient(c *Client) {
	if c == x.C {
		c.closeAfter = true
		return
	}
	c.Kill()
}

// parseACL answers the read-only ACL subcommands: users come from `user`
// directives (config.User), not from ACL SETUSER.
func parseACL(a Args) (Runner, error) {
	sub := a.NextString()
	if a.More() && (strings.EqualFold(sub, "WHOAMI") || strings.EqualFold(sub, "USERS")) {
		return nil, subArityOf("acl", sub)
	}
	switch strings.ToUpper(sub) {
	case "WHOAMI":
		return aclWhoamiCmd{}, nil
	case "USERS":
		return aclUsersCmd{}, nil
	}
	return nil, unknownSub("acl", a.V[1])
}

// aclUsersCmd is ACL USERS.
type aclUsersCmd struct{}

// Run implements Runner.
func (aclUsersCmd) Run(x *Ctx) error {
	names := append(slices.Collect(maps.Keys(x.Opts.Users)), "default")
	slices.Sort(names)
	x.W.StringList(names)
	return nil
}

// aclWhoamiCmd is ACL WHOAMI.
type aclWhoamiCmd struct{}

// Run implements Runner.
func (aclWhoamiCmd) Run(x *Ctx) error {
	x.W.BulkString(x.C.User())
	return nil
}
