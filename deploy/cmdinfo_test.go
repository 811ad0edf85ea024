package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// cmdInfo is what the deploy files may use of internal/app (the toolmesh command): its
// subcommands, flags and config-file fields, read from its source so that a
// renamed flag fails these tests instead of a rollout.
type cmdInfo struct {
	flags      map[string]bool // --name
	configKeys map[string]bool // top-level keys of the config file
}

// subcommands are the serving subcommands the deploy files run.
var subcommands = map[string]bool{"extproc": true, "xds": true, "run": true}

// loadCmdInfo parses the non-test Go files of internal/app: the flags are
// the string literals that name pflag flags (fs.String("redis", ...)), the
// config keys the json tags of the Config struct.
func loadCmdInfo(t *testing.T) cmdInfo {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "internal", "app", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	info := cmdInfo{flags: map[string]bool{}, configKeys: map[string]bool{}}
	fset := token.NewFileSet()
	structs := map[string]*ast.StructType{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if name, ok := flagName(n); ok {
					info.flags[name] = true
				}
			case *ast.TypeSpec:
				if st, ok := n.Type.(*ast.StructType); ok {
					structs[n.Name.Name] = st
				}
			}
			return true
		})
	}
	// Config's keys are its own and those of the blocks it inlines.
	var keys func(name string)
	keys = func(name string) {
		st, ok := structs[name]
		if !ok {
			return
		}
		for _, fld := range st.Fields.List {
			if id, ok := fld.Type.(*ast.Ident); ok && len(fld.Names) == 0 {
				keys(id.Name)
			} else if key := jsonKey(fld); key != "" {
				info.configKeys[key] = true
			}
		}
	}
	keys("Config")
	// Cobra's own.
	info.flags["help"] = true
	if len(info.flags) < 10 || len(info.configKeys) < 10 {
		t.Fatalf("read only %d flags and %d config keys from internal/app: has its flag code changed shape?", len(info.flags), len(info.configKeys))
	}
	return info
}

// pflagDefiners are the pflag.FlagSet methods that define a flag by name.
var pflagDefiners = map[string]bool{
	"String": true, "StringSlice": true, "StringArray": true, "Duration": true,
	"Int": true, "Int64": true, "Uint32": true, "Bool": true, "Float64": true,
}

func flagName(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !pflagDefiners[sel.Sel.Name] || len(call.Args) < 2 {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	name, err := strconv.Unquote(lit.Value)
	return name, err == nil && name != ""
}

func jsonKey(fld *ast.Field) string {
	if fld.Tag == nil {
		return ""
	}
	tag, err := strconv.Unquote(fld.Tag.Value)
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// checkArgs checks a toolmesh command line: a known subcommand first, then
// only flags that internal/app defines, each as --name=value. It returns
// the flag values by name.
func (c cmdInfo) checkArgs(t reporter, where string, args []string) (sub string, flags map[string]string) {
	t.Helper()
	flags = map[string]string{}
	if len(args) == 0 || !subcommands[args[0]] {
		t.Errorf("%s: args %q do not start with a serving subcommand", where, args)
		return "", flags
	}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("%s: argument %q is not --flag=value", where, a)
			continue
		}
		if !c.flags[name] {
			t.Errorf("%s: toolmesh has no flag --%s", where, name)
		}
		flags[name] = value
	}
	return args[0], flags
}

func TestLoadCmdInfo(t *testing.T) {
	info := loadCmdInfo(t)
	for _, f := range []string{"config", "portal", "extproc-listen", "xds-listen", "admin-listen", "envoy-listen", "redis"} {
		if !info.flags[f] {
			t.Errorf("flag --%s not found in internal/app", f)
		}
	}
	for _, k := range []string{"portal", "logFormat", "logLevel", "refreshInterval", "redis"} {
		if !info.configKeys[k] {
			t.Errorf("config key %s not found in internal/app", k)
		}
	}
	if info.flags["Config"] || info.configKeys[""] {
		t.Error("parsed something that is not a flag or key")
	}
}
