package glob

import "testing"

// TestMatch checks key-pattern matching against Redis's rules.
func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, s   string
		nocase, want bool
	}{
		{"*", "", false, true},
		{"app:*", "app:", false, true},
		{"app:*", "ap", false, false},
		{"a*b*c", "aXXbYYc", false, true},
		{"a*b*c", "aXXbYY", false, false},
		{"a?c", "abc", false, true},
		{"a?c", "ac", false, false},
		{"[abc]x", "bx", false, true},
		{"[a-]", "]", false, true}, // as Redis reads it: the range from ] to a, the class unclosed
		{"[a-]", "^", false, true},
		{"[a-]", "-", false, false},
		{"[^a-]", "-", false, true},
		{"[^a-]", "a", false, false},
		{"[^abc]x", "bx", false, false},
		{"[a-c]x", "cx", false, true},
		{"[c-a]x", "bx", false, true},
		{"[a\\]]", "]", false, true},
		{"a\\*", "a*", false, true},
		{"a\\*", "ab", false, false},
		{"path/*", "path/a/b", false, true},
		{"REQUIRE*", "requirepass", true, true},
		{"REQUIRE*", "requirepass", false, false},
		{"[A-Z]equirepass", "requirepass", true, true},
	}
	for _, tc := range cases {
		if got := Match([]byte(tc.pattern), []byte(tc.s), tc.nocase); got != tc.want {
			t.Errorf("Match(%q, %q, nocase=%v) = %v", tc.pattern, tc.s, tc.nocase, got)
		}
	}
}
