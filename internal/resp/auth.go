package resp

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/throttle"
)

// User is a user of the RESP endpoint, like a Redis 6+ ACL user: clients log in as it with AUTH name
// password or HELLO 3 AUTH name password.
type User struct {
	Name string
	// Passwords lists the passwords that log the user in; NoPass lets any password do.
	Passwords []string
	NoPass    bool
	// Disabled users cannot log in (Redis's "off").
	Disabled bool
	// ReadOnly users run no command that writes or administers (SET, DEL, CONFIG, ...).
	ReadOnly bool
	// Keys lists glob patterns (Redis's ~pattern) of the keys the user may touch; nil: every key, an empty
	// list: none. SCAN, KEYS and DBSIZE list and count only those keys for the user.
	Keys []string
	// Channels lists glob patterns (Redis's &pattern) of the pub/sub channels the user may publish and
	// subscribe to; nil or a "*" among them: every channel, an empty list: none. PSUBSCRIBE takes only a
	// pattern the list holds as it is, as Redis checks it.
	Channels []string
}

// respUser is a RESP user as the endpoint checks it: passwords kept as SHA-256 digests, compared in
// constant time.
type respUser struct {
	name     string
	digests  [][sha256.Size]byte
	nopass   bool
	disabled bool
	readOnly bool
	keys     []string // glob patterns; nil: every key
	channels []string // glob patterns; nil: every channel
}

func newUser(u User) *respUser {
	ru := &respUser{name: u.Name, nopass: u.NoPass, disabled: u.Disabled, readOnly: u.ReadOnly, keys: u.Keys, channels: u.Channels}
	if slices.Contains(ru.channels, "*") {
		ru.channels = nil
	}
	for _, p := range u.Passwords {
		ru.digests = append(ru.digests, sha256.Sum256([]byte(p)))
	}
	return ru
}

// respACL holds the endpoint's users, "default" among them.
type respACL struct {
	users map[string]*respUser
	decoy *respUser // checked when the name is unknown, so a wrong name costs what a wrong password does
}

// newRESPACL builds the users: "default" has password (none: any password, as Redis's nopass) unless users
// defines it.
func newRESPACL(password string, users []User) *respACL {
	acl := &respACL{users: map[string]*respUser{}, decoy: newUser(User{Passwords: []string{"\x00"}})}
	def := User{Name: "default", NoPass: password == ""}
	if password != "" {
		def.Passwords = []string{password}
	}
	acl.users[def.Name] = newUser(def)
	for _, u := range users {
		acl.users[u.Name] = newUser(u)
	}
	return acl
}

// initialUser is the user a new connection is logged in as: "default" when it needs no password.
func (a *respACL) initialUser() *respUser {
	if d := a.users["default"]; d.nopass && !d.disabled {
		return d
	}
	return nil
}

// required reports whether clients must log in before they run commands.
func (a *respACL) required() bool { return a.initialUser() == nil }

// authenticate returns the user name logs in as with pass, or nil. Every stored digest of the user is
// compared, in constant time, whatever the outcome.
func (a *respACL) authenticate(name, pass []byte) *respUser {
	u, known := a.users[string(name)]
	if !known {
		u = a.decoy
	}
	sum := sha256.Sum256(pass)
	match := 0
	for _, d := range u.digests {
		match |= subtle.ConstantTimeCompare(sum[:], d[:])
	}
	if !known || u.disabled || (match == 0 && !u.nopass) {
		return nil
	}
	return u
}

// ValidateUsers checks the users of Config.RESPUsers: named, once each, "default" defined by one of
// RESPPassword and RESPUsers only.
func ValidateUsers(users []User, password string) error {
	seen := map[string]bool{}
	for _, u := range users {
		switch {
		case u.Name == "" || strings.ContainsFunc(u.Name, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return fmt.Errorf("RESPUsers: user name %q must be non-empty, without spaces or control characters", u.Name)
		case seen[u.Name]:
			return fmt.Errorf("RESPUsers: user %q defined twice", u.Name)
		case u.Name == "default" && password != "":
			return errors.New("RESPUsers defines user \"default\" and RESPPassword is set: set one of them")
		case u.NoPass && len(u.Passwords) > 0:
			return fmt.Errorf("RESPUsers: user %q has passwords and NoPass", u.Name)
		case containsEmpty(u.Keys):
			return fmt.Errorf("RESPUsers: user %q has an empty key pattern", u.Name)
		case containsEmpty(u.Channels):
			return fmt.Errorf("RESPUsers: user %q has an empty channel pattern", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}

func containsEmpty(list []string) bool {
	for _, s := range list {
		if s == "" {
			return true
		}
	}
	return false
}

// mayRun reports whether u may run cmd: a read-only user runs nothing that writes or administers.
func (u *respUser) mayRun(cmd *respCommand) bool {
	switch {
	case cmd.everyKey && u.keys != nil:
		return false // FLUSHALL deletes keys the user may not touch
	case u.readOnly:
		return !cmd.hasFlag("write") && !cmd.hasFlag("admin")
	}
	return true
}

// mayAccess reports whether every key of the command args matches one of u's key patterns.
func (u *respUser) mayAccess(cmd *respCommand, args [][]byte) bool {
	if u.keys == nil || !cmd.takesKeys() || cmd.hasFlag("pubsub") { // a channel is no key
		return true
	}
	for _, key := range cmd.keys(args) {
		if !matchesAny(u.keys, key) {
			return false
		}
	}
	return true
}

// mayUseChannels reports whether u may use every channel the command args name: a channel must match one
// of u's patterns, and a pattern a subscription asks for must be one of them.
func (u *respUser) mayUseChannels(cmd *respCommand, args [][]byte) bool {
	if u.channels == nil || cmd.channels == 0 {
		return true
	}
	names := args[1:]
	if cmd.channels > 0 {
		names = args[1 : cmd.channels+1]
	}
	for _, name := range names {
		if cmd.channelPatterns && !slices.Contains(u.channels, string(name)) ||
			!cmd.channelPatterns && !matchesAny(u.channels, name) {
			return false
		}
	}
	return true
}

// visible returns the keys of keys that u may access, in place: a user limited to some keys lists only
// those.
func (u *respUser) visible(keys []string) []string {
	if u.keys == nil {
		return keys
	}
	return slices.DeleteFunc(keys, func(k string) bool { return !matchesAny(u.keys, []byte(k)) })
}

func matchesAny(patterns []string, key []byte) bool {
	for _, p := range patterns {
		if glob.Match([]byte(p), key, false) {
			return true
		}
	}
	return false
}

// permissionError returns the NOPERM error Redis gives when the user may not run the command on its keys
// or channels, or "" when it may.
func (c *respConn) permissionError(cmd *respCommand, args [][]byte) string {
	switch {
	case !c.user.mayRun(cmd):
		return "NOPERM this user has no permissions to run the '" + cmd.fullName(args) + "' command"
	case !c.user.mayAccess(cmd, args):
		return "NOPERM this user has no permissions to access one of the keys used as arguments"
	case !c.user.mayUseChannels(cmd, args):
		return "NOPERM this user has no permissions to access one of the channels used as arguments"
	}
	return ""
}

// Password guessing is slowed per source address: each may fail authFailureBurst times at once, then once
// per authFailureInterval. A client that would have to wait more than authMaxWait is disconnected without
// its password being checked. A connection is also closed after authFailuresPerConn failures.
const (
	authFailureBurst    = 10
	authFailureInterval = 20 * time.Millisecond
	authMaxWait         = time.Second
	authFailuresPerConn = 10
	authTrackedAddrs    = 1 << 16 // beyond, the addresses not seen lately share one record
)

// newAuthThrottle returns the RESP endpoint's login throttle.
func newAuthThrottle() *throttle.Logins {
	return throttle.New(authFailureBurst, authFailureInterval, authMaxWait, authTrackedAddrs)
}

// sourceAddr is the address a connection's login attempts are booked under: its remote IP.
func (c *respConn) sourceAddr() string {
	host, _, err := net.SplitHostPort(c.conn.RemoteAddr().String())
	if err != nil {
		return c.conn.RemoteAddr().String()
	}
	return host
}

// logInAs checks a user name and password, throttled, and logs the connection in. On failure it writes
// WRONGPASS, or hangs up on a client that failed too often, and reports false.
func (c *respConn) logInAs(name, pass []byte) bool {
	addr := c.sourceAddr()
	wait, ok := c.srv.throttle.Book(addr, time.Now())
	if !ok || !c.pause(wait) {
		c.hangUp, c.quit = true, true
		return false
	}
	u := c.srv.acl.authenticate(name, pass)
	if u == nil {
		c.authFailures++
		c.wr.error("WRONGPASS invalid username-password pair or user is disabled.")
		if c.authFailures >= authFailuresPerConn {
			c.quit = true
		}
		return false
	}
	c.srv.throttle.Refund(addr)
	c.logIn(u)
	return true
}

// pause waits d, unless the server closes first, and reports whether the wait ran its course.
func (c *respConn) pause(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.srv.ctx.Done():
		return false
	}
}

// cmdAuth serves AUTH password (user "default") and AUTH user password.
func (c *respConn) cmdAuth(args [][]byte) {
	if len(args) > 3 {
		c.syntaxError()
		return
	}
	user := []byte("default")
	if len(args) == 3 {
		user = args[1]
	} else if c.srv.acl.users["default"].nopass {
		c.wr.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	if c.logInAs(user, args[len(args)-1]) {
		c.wr.ok()
	}
}

// cmdHello serves HELLO [protover [AUTH user pass] [SETNAME name]]: it logs in, switches RESP2/RESP3 and
// describes the server. As in Redis, options are checked first, then the login, then the name.
func (c *respConn) cmdHello(args [][]byte) {
	proto := c.wr.proto
	if len(args) > 1 {
		v, ok := kv.ParseCanonicalInt(args[1])
		if !ok {
			c.wr.error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.wr.error("NOPROTO unsupported protocol version")
			return
		}
		proto = int(v)
	}
	opts, ok := c.helloOptions(args[min(2, len(args)):])
	switch {
	case !ok:
		return
	case opts.user != nil && !c.logInAs(opts.user, opts.pass):
		return
	case c.user == nil:
		c.wr.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	case opts.name != nil && !validClientName(opts.name):
		c.wr.error("ERR Client names cannot contain spaces, newlines or special characters.")
		return
	}
	if opts.name != nil {
		c.name = string(opts.name)
	}
	c.wr.proto = proto
	c.pushes.mu.Lock()
	c.pushes.resp3 = proto == 3 && c.tracked != nil // a RESP2 client is sent no push
	c.pushes.proto3 = proto == 3
	c.pushes.mu.Unlock()
	c.helloReply()
}

// helloArgs are HELLO's options.
type helloArgs struct {
	user, pass, name []byte
}

// helloOptions reads HELLO's AUTH and SETNAME options. It writes the error itself when one is wrong.
func (c *respConn) helloOptions(opts [][]byte) (helloArgs, bool) {
	var h helloArgs
	for i := 0; i < len(opts); i++ {
		switch {
		case isSubcommand(opts[i], "AUTH") && i+2 < len(opts):
			h.user, h.pass = opts[i+1], opts[i+2]
			i += 2
		case isSubcommand(opts[i], "SETNAME") && i+1 < len(opts):
			h.name = opts[i+1]
			i++
		default:
			c.wr.error(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", cString(opts[i], len(opts[i]))))
			return h, false
		}
	}
	return h, true
}
