package zaris

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The budgets the architecture rules hold Node to: what it has today, lowered as concerns move into
// components, never raised. A new feature lands in a component that takes the few things it uses.
const (
	nodeFieldBudget  = 26
	nodeMethodBudget = 26 // unexported methods
)

// coreFilesNamingTheEdge are the core files that name something the RESP edge (resp*.go) declares: the
// adapter of the node to it. No other file may.
var coreFilesNamingTheEdge = []string{"redis.go"}

// parseRoot parses the root package's non-test files.
func parseRoot(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return fset, files
}

// TestArchitectureNoBackPointers checks that no type but Node itself holds a *Node: the parts of a node
// take what they use through small interfaces, functions or components.
func TestArchitectureNoBackPointers(t *testing.T) {
	fset, files := parseRoot(t)
	for _, f := range files {
		ast.Inspect(f, func(x ast.Node) bool {
			ts, ok := x.(*ast.TypeSpec)
			if !ok || ts.Name.Name == "Node" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				if holdsNode(field.Type) {
					t.Errorf("%v: type %s holds a *Node", fset.Position(field.Pos()), ts.Name.Name)
				}
			}
			return true
		})
	}
}

// holdsNode reports whether a field of type expr holds a *Node, directly or in a slice, map or array.
func holdsNode(expr ast.Expr) bool {
	found := false
	ast.Inspect(expr, func(x ast.Node) bool {
		if _, ok := x.(*ast.FuncType); ok {
			return false // a function taking or returning a Node holds none
		}
		if star, ok := x.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "Node" {
				found = true
			}
		}
		return true
	})
	return found
}

// TestArchitectureNodeBudget checks that Node's fields and unexported methods stay within their budgets.
func TestArchitectureNodeBudget(t *testing.T) {
	_, files := parseRoot(t)
	fields, methods := 0, 0
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Node" {
						for _, field := range ts.Type.(*ast.StructType).Fields.List {
							fields += max(1, len(field.Names))
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && receiverIsNode(d.Recv.List[0].Type) && !d.Name.IsExported() {
					methods++
				}
			}
		}
	}
	if fields > nodeFieldBudget {
		t.Errorf("Node has %d fields, over its budget of %d: give the new state to a component", fields, nodeFieldBudget)
	}
	if methods > nodeMethodBudget {
		t.Errorf("Node has %d unexported methods, over its budget of %d: put the new work in a component", methods, nodeMethodBudget)
	}
	t.Logf("Node: %d fields (budget %d), %d unexported methods (budget %d)", fields, nodeFieldBudget, methods, nodeMethodBudget)
}

func receiverIsNode(expr ast.Expr) bool {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	id, ok := expr.(*ast.Ident)
	return ok && id.Name == "Node"
}

// TestArchitectureEdgeStaysApart checks that the core names nothing the RESP edge declares, outside the
// few files of its wiring.
func TestArchitectureEdgeStaysApart(t *testing.T) {
	_, files := parseRoot(t)
	edge := map[string]bool{}
	for name, f := range files {
		if !strings.HasPrefix(name, "resp") {
			continue
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					edge[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						edge[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, id := range s.Names {
							edge[id.Name] = true
						}
					}
				}
			}
		}
	}
	for name, f := range files {
		if strings.HasPrefix(name, "resp") || slices.Contains(coreFilesNamingTheEdge, name) {
			continue
		}
		ast.Inspect(f, func(x ast.Node) bool {
			if id, ok := x.(*ast.Ident); ok && edge[id.Name] {
				t.Errorf("%s names %s, which the RESP edge declares", name, id.Name)
			}
			return true
		})
	}
}

// TestArchitectureLowerPackagesStandApart checks that the packages the core builds on (transport,
// durability, internal) never import the root package: vocabulary flows down, never back up.
func TestArchitectureLowerPackagesStandApart(t *testing.T) {
	const root = "github.com/zaris-go/zaris"
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range []string{"transport", "durability", "internal"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == root {
					t.Errorf("%s imports the root package", path)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked == 0 {
		t.Fatal("no file checked")
	}
}

// TestArchitectureOneRouteLoop checks that one loop routes and resends what owners refuse for a stale
// routing table: only client.go takes a refusal to a redirectPacer (again).
func TestArchitectureOneRouteLoop(t *testing.T) {
	_, files := parseRoot(t)
	for name, f := range files {
		ast.Inspect(f, func(x ast.Node) bool {
			call, ok := x.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "again" && name != "client.go" {
				t.Errorf("%s resends a refused request itself: route it through client.routeSegment", name)
			}
			return true
		})
	}
}
