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
	nodeFieldBudget  = 15
	nodeMethodBudget = 14 // unexported methods, all in node.go
)

// coreFilesNamingTheEdge are the core files that import the Redis edge (internal/resp): the adapter of the
// node to it. No other file may.
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

// TestArchitectureNodeBudget checks that Node's fields and unexported methods stay within their budgets,
// and that its unexported methods are node.go's wiring: any other file's work belongs to a component.
func TestArchitectureNodeBudget(t *testing.T) {
	_, files := parseRoot(t)
	fields, methods := 0, 0
	for name, f := range files {
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
					if name != "node.go" {
						t.Errorf("%s: Node.%s is an unexported method outside node.go: put the work in a component", name, d.Name.Name)
					}
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

// TestArchitectureEdgeStaysApart checks that the Redis edge (internal/resp) is imported by the adapter
// alone, and that the edge imports the standard library and the small internal packages only: it reaches
// the node through resp.Node and nothing else.
func TestArchitectureEdgeStaysApart(t *testing.T) {
	const edge = "github.com/zaris-go/zaris/internal/resp"
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	importers := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == edge {
				importers++
				if !slices.Contains(coreFilesNamingTheEdge, name) {
					t.Errorf("%s imports the Redis edge: only %v may", name, coreFilesNamingTheEdge)
				}
			}
		}
	}
	if importers != len(coreFilesNamingTheEdge) {
		t.Errorf("%d core files import the edge, want %d (%v)", importers, len(coreFilesNamingTheEdge), coreFilesNamingTheEdge)
	}
	edgeFiles, err := filepath.Glob("internal/resp/*.go")
	if err != nil || len(edgeFiles) == 0 {
		t.Fatalf("no file in internal/resp: %v", err)
	}
	for _, name := range edgeFiles {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, ".") && !strings.HasPrefix(p, "github.com/zaris-go/zaris/internal/") &&
				p != "github.com/zaris-go/zaris/transport" {
				t.Errorf("%s imports %s: the edge builds on the standard library and internal packages only", name, p)
			}
		}
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

// concernFloors ranks the root package's files by concern, from the vocabulary every part speaks up to the
// Redis edge. A file of one floor should use only what its own floor and those below declare; a
// reference up the floors means a lower concern knows a higher one.
var concernFloors = [][]string{
	{"clock.go", "errors.go", "lifetime.go", "wire.go", "pubsub_wire.go", "kv_wire.go", "batch_wire.go", "placement.go",
		"clustermap.go", "stats.go", "status.go", "identity.go", "config.go", "version.go"},
	{"operations.go", "keygroup.go", "object.go", "store.go", "keytable.go", "memory.go", "evictionpool.go",
		"undo.go", "hash.go", "set.go", "list.go", "strings.go", "zset.go", "zskip.go", "collections.go",
		"collection_ops.go", "commands.go", "versions.go", "txn_ops.go", "txn_intent.go", "access.go",
		"readmarks.go", "scan_walk.go"},
	{"oplog.go", "replication.go", "replication_wire.go", "replicalink.go", "persistence.go", "watchfeed.go",
		"possession.go", "cutover.go", "visibility.go"},
	{"owner.go", "replica_reads.go", "scan_serve.go", "nearcache_feed.go", "txn_resolver.go", "expiry.go", "panics.go", "loader.go", "pubsub.go",
		"backup_serve.go"},
	{"control.go", "decide.go", "rebalance.go", "voters.go", "recover.go", "failover.go", "health.go",
		"leave.go", "membership.go", "protocol.go", "raftstream.go", "peertrust.go", "security.go"},
	{"client.go", "routing.go", "batch.go", "scan.go", "watch.go", "nearcache.go", "txn.go", "txn_commit.go", "blockingpop.go",
		"backup.go", "restore.go"},
	{"node.go", "dataport.go", "zaris.go", "doc.go", "metrics.go", "opmetrics.go", "statusview.go", "statuspage.go"},
	{"redis.go"},
}

// upwardArrowBudget bounds the arrows that run up concernFloors: what there are today, lowered as concerns
// settle on their floors, never raised.
const upwardArrowBudget = 44

// TestArchitectureLayers draws the arrows between the root package's files (file A uses a name file B
// declares), finds those that run up concernFloors, and holds their number to its budget. Every file must
// have a floor. The exported methods of Node are the API's, on the floor of node.go wherever they live
// (each data type's file holds its own). Names are resolved without type information: a name by the
// top-level declaration of that name, an unexported selector by the one method or field of that name (one
// declared more than once is not followed); an exported selector may name the standard library's.
func TestArchitectureLayers(t *testing.T) {
	files := parseRootResolved(t)
	floor := map[string]int{}
	for name := range files {
		floor[name] = -1
		for i, names := range concernFloors {
			for _, pattern := range names {
				if ok, _ := filepath.Match(pattern, name); ok {
					floor[name] = i
				}
			}
		}
		if floor[name] < 0 {
			t.Errorf("%s has no floor in concernFloors", name)
		}
	}
	total, up := 0, 0
	for arrow, why := range packageArrows(files) {
		total++
		from := floor[arrow.from]
		if arrow.api {
			from = floor["node.go"]
		}
		if floor[arrow.to] > from {
			up++
			if os.Getenv("ZARIS_ARCH_LIST") != "" {
				t.Logf("up: %s (%d) -> %s (%d) by %s", arrow.from, from, arrow.to, floor[arrow.to], why)
			}
		}
	}
	if up > upwardArrowBudget {
		t.Errorf("%d arrows run up the floors, over the budget of %d: a lower concern uses a higher one", up, upwardArrowBudget)
	}
	t.Logf("%d files on %d floors, %d arrows, %d of them up (budget %d; ZARIS_ARCH_LIST=1 lists them)",
		len(files), len(concernFloors), total, up, upwardArrowBudget)
}

// arrow says that file from uses a name file to declares; api marks the uses of Node's exported methods.
type arrow struct {
	from, to string
	api      bool
}

// packageArrows returns the arrows between files, each with one name that draws it.
func packageArrows(files map[string]*ast.File) map[arrow]string {
	top := map[string]string{}       // top-level name -> file
	members := map[string][]string{} // unexported method or field name -> files declaring one
	member := func(name, file string) {
		if !ast.IsExported(name) {
			members[name] = append(members[name], file)
		}
	}
	for name, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top[d.Name.Name] = name
				} else {
					member(d.Name.Name, name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						top[s.Name.Name] = name
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								for _, id := range field.Names {
									member(id.Name, name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							top[id.Name] = name
						}
					}
				}
			}
		}
	}
	arrows := map[arrow]string{}
	for name, f := range files {
		for _, decl := range f.Decls {
			fd, isFunc := decl.(*ast.FuncDecl)
			api := isFunc && fd.Recv != nil && receiverIsNode(fd.Recv.List[0].Type) && fd.Name.IsExported()
			add := func(target, why string) {
				if target != "" && target != name {
					arrows[arrow{from: name, to: target, api: api}] = why
				}
			}
			sels := map[*ast.Ident]bool{}
			ast.Inspect(decl, func(x ast.Node) bool {
				switch x := x.(type) {
				case *ast.FieldList:
					if isFunc && x == fd.Recv {
						return false // the receiver's type is where the method belongs, not what it uses
					}
				case *ast.SelectorExpr:
					sels[x.Sel] = true
					if decls := members[x.Sel.Name]; len(decls) == 1 {
						add(decls[0], x.Sel.Name)
					}
				case *ast.Ident:
					// The parser resolves the names a file declares, locals among them; the rest are
					// the package's other files' or predeclared.
					if !sels[x] && x.Obj == nil {
						add(top[x.Name], x.Name)
					}
				}
				return true
			})
		}
	}
	return arrows
}

// parseRootResolved parses the root package's non-test files, resolving the names each file declares.
func parseRootResolved(t *testing.T) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if files[name], err = parser.ParseFile(fset, name, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	return files
}
