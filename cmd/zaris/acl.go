package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/zaris-go/zaris"
)

// loadACLFile reads RESP users from a file in the form of Redis's ACL files, one user a line:
//
//	# comment
//	user alice on >secret ~cache:* &events:* +@all
//	user reporter on >other ~* +@read
//
// The rules understood are those Zaris can enforce: on and off (a user starts off), >password and
// <password, nopass, resetpass, ~pattern, allkeys and resetkeys (a user starts with no key), &pattern,
// allchannels and resetchannels (a user starts with no pub/sub channel, as in Redis 7), and +@all or
// allcommands (every command) or +@read (no command that writes or administers); a user that is on needs
// one of the last three.
func loadACLFile(name string) ([]zaris.RESPUser, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--acl-file: %w", err)
	}
	defer f.Close()
	users, err := parseACL(f)
	if err != nil {
		return nil, fmt.Errorf("--acl-file %s%w", name, err)
	}
	return users, nil
}

// parseACL reads the users of an ACL file. An error names the line at fault, after a colon.
func parseACL(r io.Reader) ([]zaris.RESPUser, error) {
	var users []zaris.RESPUser
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		u, err := parseACLUser(fields)
		if err != nil {
			return nil, fmt.Errorf(":%d: %w", line, err)
		}
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	return users, nil
}

// withDefaultUser returns users with "default" disabled when the file does not define it and no
// --password opens it: a server given users admits nobody anonymously unless its file says so.
func withDefaultUser(users []zaris.RESPUser, password string) []zaris.RESPUser {
	if password != "" || slices.ContainsFunc(users, func(u zaris.RESPUser) bool { return u.Name == "default" }) {
		return users
	}
	return append(users, zaris.RESPUser{Name: "default", Disabled: true})
}

// parseACLUser reads "user <name> <rule>...".
func parseACLUser(fields []string) (zaris.RESPUser, error) {
	if fields[0] != "user" || len(fields) < 2 {
		return zaris.RESPUser{}, fmt.Errorf("want: user <name> <rules>, got %q", strings.Join(fields, " "))
	}
	u := zaris.RESPUser{Name: fields[1], Disabled: true, Keys: []string{}, Channels: []string{}}
	commands := false
	for _, rule := range fields[2:] {
		switch {
		case rule == "on", rule == "off":
			u.Disabled = rule == "off"
		case strings.HasPrefix(rule, ">"):
			u.Passwords, u.NoPass = append(u.Passwords, rule[1:]), false
		case strings.HasPrefix(rule, "<"):
			u.Passwords = remove(u.Passwords, rule[1:])
		case rule == "nopass":
			u.Passwords, u.NoPass = nil, true
		case rule == "resetpass":
			u.Passwords, u.NoPass = nil, false
		case strings.HasPrefix(rule, "~") && len(rule) > 1:
			u.Keys = append(u.Keys, rule[1:])
		case rule == "allkeys":
			u.Keys = append(u.Keys, "*")
		case rule == "resetkeys":
			u.Keys = []string{}
		case strings.HasPrefix(rule, "&") && len(rule) > 1:
			u.Channels = append(u.Channels, rule[1:])
		case rule == "allchannels":
			u.Channels = append(u.Channels, "*")
		case rule == "resetchannels":
			u.Channels = []string{}
		case rule == "+@all", rule == "allcommands":
			u.ReadOnly, commands = false, true
		case rule == "+@read":
			u.ReadOnly, commands = true, true
		default:
			return u, fmt.Errorf("user %s: rule %q is not supported", u.Name, rule)
		}
	}
	if !commands && !u.Disabled {
		return u, fmt.Errorf("user %s: no command rule; give +@all (or allcommands) or +@read", u.Name)
	}
	return u, nil
}

func remove(list []string, s string) []string {
	out := list[:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}
