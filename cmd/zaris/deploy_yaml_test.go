package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// yamlLine is one line of a YAML document that holds something: its indentation, its text without the
// comment, and its number in the file.
type yamlLine struct {
	indent int
	text   string
	num    int
}

// parseYAML reads the block-style YAML that Kubernetes manifests are written in: mappings, sequences,
// flow sequences of scalars, plain and quoted scalars (all kept as strings), comments, and documents
// split by "---". Anything else (anchors, block scalars, flow mappings) is an error, not a guess.
func parseYAML(src string) ([]any, error) {
	var docs []any
	var lines []yamlLine
	flush := func() error {
		if len(lines) == 0 {
			return nil
		}
		p := &yamlParser{lines: lines}
		v, err := p.node(lines[0].indent)
		if err == nil && p.pos < len(lines) {
			err = fmt.Errorf("line %d: unexpected indentation", lines[p.pos].num)
		}
		docs, lines = append(docs, v), nil
		return err
	}
	for i, raw := range strings.Split(src, "\n") {
		if strings.TrimRight(raw, " \r") == "---" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		text := strings.TrimRight(stripYAMLComment(raw), " \r")
		trimmed := strings.TrimLeft(text, " ")
		if trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, "\t") {
			return nil, fmt.Errorf("line %d: a tab indents", i+1)
		}
		lines = append(lines, yamlLine{indent: len(text) - len(trimmed), text: trimmed, num: i + 1})
	}
	return docs, flush()
}

// yamlParser walks the lines of one document.
type yamlParser struct {
	lines []yamlLine
	pos   int
}

// node reads the mapping or sequence whose lines start at indent.
func (p *yamlParser) node(indent int) (any, error) {
	if isYAMLItem(p.lines[p.pos].text) {
		return p.sequence(indent)
	}
	return p.mapping(indent)
}

// sequence reads "- item" lines at indent. An item "- key: value" is a mapping whose first key shares the
// dash's line, its other keys aligned with that first one.
func (p *yamlParser) sequence(indent int) (any, error) {
	items := []any{}
	for p.pos < len(p.lines) && p.lines[p.pos].indent == indent && isYAMLItem(p.lines[p.pos].text) {
		l := p.lines[p.pos]
		rest := strings.TrimLeft(l.text[1:], " ")
		var v any
		var err error
		switch _, _, isKey := splitYAMLKey(rest); {
		case rest == "":
			p.pos++
			v, err = p.nested(indent)
		case isKey:
			p.lines[p.pos] = yamlLine{indent: l.indent + len(l.text) - len(rest), text: rest, num: l.num}
			v, err = p.mapping(p.lines[p.pos].indent)
		default:
			v, err = yamlScalar(rest, l.num)
			p.pos++
		}
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
	return items, nil
}

// mapping reads "key: value" lines at indent; a key with nothing after its colon holds the block below it.
func (p *yamlParser) mapping(indent int) (any, error) {
	m := map[string]any{}
	for p.pos < len(p.lines) && p.lines[p.pos].indent == indent && !isYAMLItem(p.lines[p.pos].text) {
		l := p.lines[p.pos]
		key, rest, ok := splitYAMLKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: want key: value, got %q", l.num, l.text)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: key %q twice", l.num, key)
		}
		p.pos++
		var v any
		var err error
		if rest != "" {
			v, err = yamlScalar(rest, l.num)
		} else {
			v, err = p.nested(indent)
		}
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, nil
}

// nested reads the block under a key or an empty item at indent: deeper lines, or a sequence at the same
// indentation (YAML lets a mapping's sequence start at its key's column). Nothing there is a null.
func (p *yamlParser) nested(indent int) (any, error) {
	if p.pos == len(p.lines) {
		return nil, nil
	}
	next := p.lines[p.pos]
	if next.indent > indent || next.indent == indent && isYAMLItem(next.text) {
		return p.node(next.indent)
	}
	return nil, nil
}

func isYAMLItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// splitYAMLKey splits "key: value" (or "key:") at the first colon followed by a space or the end of the line.
func splitYAMLKey(text string) (key, rest string, ok bool) {
	if text == "" || strings.ContainsAny(text[:1], `"'[{`) {
		return "", "", false
	}
	if i := strings.Index(text, ": "); i > 0 {
		return text[:i], strings.TrimSpace(text[i+2:]), true
	}
	if k, found := strings.CutSuffix(text, ":"); found && !strings.Contains(k, ": ") {
		return k, "", true
	}
	return "", "", false
}

// yamlScalar reads a plain or quoted scalar, or a flow sequence of them.
func yamlScalar(s string, num int) (any, error) {
	switch {
	case strings.HasPrefix(s, "["):
		inner, ok := strings.CutSuffix(s[1:], "]")
		if !ok {
			return nil, fmt.Errorf("line %d: a flow sequence must end on its line", num)
		}
		items := []any{}
		for _, part := range splitOutsideQuotes(inner, ',') {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			v, err := yamlScalar(part, num)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	case strings.HasPrefix(s, `"`):
		v, err := strconv.Unquote(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %v", num, s, err)
		}
		return v, nil
	case strings.HasPrefix(s, "'"):
		inner, ok := strings.CutSuffix(s[1:], "'")
		if !ok || len(s) < 2 {
			return nil, fmt.Errorf("line %d: unterminated %s", num, s)
		}
		return strings.ReplaceAll(inner, "''", "'"), nil
	case strings.ContainsAny(s[:1], "{&*|>!"):
		return nil, fmt.Errorf("line %d: %q is YAML this reader does not take", num, s)
	}
	return s, nil
}

// stripYAMLComment drops a comment: a # at the start of the line or after a space, outside quotes.
func stripYAMLComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

// splitOutsideQuotes splits s at every sep that is outside double or single quotes.
func splitOutsideQuotes(s string, sep byte) []string {
	var parts []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == sep:
			parts, start = append(parts, s[start:i]), i+1
		}
	}
	return append(parts, s[start:])
}

// dig walks v through mapping keys (string) and sequence indexes (int); nil where a step is missing.
func dig(v any, path ...any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			seq, _ := v.([]any)
			if s < 0 || s >= len(seq) {
				return nil
			}
			v = seq[s]
		}
	}
	return v
}

// digString is dig for a scalar: "" where it is missing or not a scalar.
func digString(v any, path ...any) string {
	s, _ := dig(v, path...).(string)
	return s
}

// digList is dig for a sequence: nil where it is missing or not a sequence.
func digList(v any, path ...any) []any {
	seq, _ := dig(v, path...).([]any)
	return seq
}

func TestParseYAML(t *testing.T) {
	const src = `# a comment
kind: Thing   # another
spec:
  items:
  - name: a
    value: "x: #y"
  -  plain # note
  - ["p", 'q''s', r]
  -
    nested: yes
  empty:
---
second: '2'
`
	docs, err := parseYAML(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"kind": "Thing", "spec": map[string]any{
			"items": []any{
				map[string]any{"name": "a", "value": "x: #y"},
				"plain",
				[]any{"p", "q's", "r"},
				map[string]any{"nested": "yes"},
			},
			"empty": nil,
		}},
		map[string]any{"second": "2"},
	}
	if !reflect.DeepEqual(docs, want) {
		t.Fatalf("got %#v\nwant %#v", docs, want)
	}
	for _, bad := range []string{"a: 1\n  b: 2\n", "a: 1\na: 2\n", "a: |\n  text\n", "a: [1, 2\n", "a:\n\t- b\n", "just text\n"} {
		if _, err := parseYAML(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
