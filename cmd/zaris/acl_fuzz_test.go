package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/zaris-go/zaris"
)

// FuzzACLFile parses random ACL files: the parser never panics, every user it accepts has a name without
// spaces, and a config given those users validates or says why, without panicking either.
func FuzzACLFile(f *testing.F) {
	for _, seed := range []string{
		"user app on >secret ~app:* +@all\n",
		"# comment\nuser reporter on >other ~* +@read\nuser default off\n",
		"user x on nopass allkeys allcommands resetkeys ~a resetpass <old >new\n",
		"user\n", "user a b c\n", "\x00\xff\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, file string) {
		users, err := parseACL(strings.NewReader(file))
		if err != nil {
			return
		}
		for _, u := range users {
			if u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n") {
				t.Fatalf("user named %q accepted", u.Name)
			}
		}
		cfg := zaris.DefaultConfig()
		cfg.Name = "fuzz"
		cfg.RESPUsers = withDefaultUser(users, "")
		if err := cfg.Validate(); err != nil && !errors.Is(err, zaris.ErrInvalidConfig) {
			t.Fatalf("Validate of parsed users: %v", err)
		}
	})
}
