package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every exported identifier of a package other than main has a doc
// comment (STYLE: doc comments say what blocks, in which unit, and which
// errors come back): functions, methods of exported types, types,
// constants and variables (a group's comment counts for its members).
func TestExportedIdentifiersHaveDocComments(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "../.." && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		missing := func(pos token.Pos, what string) {
			t.Errorf("%s: %s has no doc comment", fset.Position(pos), what)
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Doc != nil || !decl.Name.IsExported() {
					continue
				}
				if decl.Recv == nil {
					missing(decl.Pos(), decl.Name.Name)
				} else if recv := recvName(decl.Recv.List[0].Type); ast.IsExported(recv) {
					missing(decl.Pos(), recv+"."+decl.Name.Name)
				}
			case *ast.GenDecl:
				if decl.Doc != nil {
					continue
				}
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Doc == nil && spec.Comment == nil && spec.Name.IsExported() {
							missing(spec.Pos(), spec.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if spec.Doc == nil && spec.Comment == nil && n.IsExported() {
								missing(n.Pos(), n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recvName is the type name of a method's receiver (T, *T, T[P]).
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
