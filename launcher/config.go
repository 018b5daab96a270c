package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// configFile is a parsed HERMETIC.toml or [tool.hermetic] table.
type configFile struct {
	path     string
	entries  []entry
	profiles map[string][]entry
}

// findConfig looks for HERMETIC.toml, or a pyproject.toml with a
// [tool.hermetic] table, in dir and then in each parent directory. In a
// directory that has both, HERMETIC.toml is used. A pyproject.toml without
// [tool.hermetic] does not stop the search.
func findConfig(dir string) (string, error) {
	for d := filepath.Clean(dir); ; {
		p := filepath.Join(d, "HERMETIC.toml")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		p = filepath.Join(d, "pyproject.toml")
		if data, err := os.ReadFile(p); err == nil && hasToolHermetic(data) {
			return p, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", nil
		}
		d = parent
	}
}

// hasToolHermetic reports whether a pyproject.toml has [tool.hermetic]. A
// file that does not parse counts as having it, so that its error is shown
// rather than silently skipped.
func hasToolHermetic(data []byte) bool {
	var root map[string]any
	if _, err := toml.Decode(string(data), &root); err != nil {
		return strings.Contains(string(data), "hermetic")
	}
	_, ok := lookupTable(root, "tool", "hermetic")
	return ok
}

func lookupTable(root map[string]any, path ...string) (map[string]any, bool) {
	cur := root
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// loadConfig reads a config file. In pyproject.toml the settings are the
// [tool.hermetic] table; in any other file they are the top-level keys, or
// a [tool.hermetic] table when that is all the file holds.
func loadConfig(path string) (*configFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	text := string(data)
	var root map[string]any
	if _, err := toml.Decode(text, &root); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %s", path, pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}

	var prefix toml.Key
	table := root
	if t, ok := lookupTable(root, "tool", "hermetic"); ok && (filepath.Base(path) == "pyproject.toml" || len(root) == 1 && len(root["tool"].(map[string]any)) == 1) {
		prefix, table = toml.Key{"tool", "hermetic"}, t
	} else if filepath.Base(path) == "pyproject.toml" {
		return nil, fmt.Errorf("%s: no [tool.hermetic] table", path)
	}

	c := &configFile{path: path, profiles: map[string][]entry{}}
	l := configLoader{path: path, text: text, dir: filepath.Dir(path)}
	if c.entries, err = l.entries(table, prefix, false); err != nil {
		return nil, err
	}
	if raw, ok := table["profiles"]; ok {
		pk := append(slices.Clone(prefix), "profiles")
		profiles, ok := raw.(map[string]any)
		if !ok {
			return nil, l.errorf(pk, "want a table of profiles, such as [tool.hermetic.profiles.NAME]")
		}
		for _, name := range sortedMapKeys(profiles) {
			k := append(slices.Clone(pk), name)
			if _, builtin := builtinProfile(name); builtin {
				return nil, l.errorf(k, "%q is a built-in profile; give yours another name", name)
			}
			t, ok := profiles[name].(map[string]any)
			if !ok {
				return nil, l.errorf(k, "want a table of settings")
			}
			es, err := l.entries(t, k, true)
			if err != nil {
				return nil, err
			}
			c.profiles[name] = es
		}
	}
	return c, nil
}

// configLoader turns TOML tables into entries, with errors that name the
// file, the key and its line.
type configLoader struct {
	path, text, dir string
}

func (l configLoader) where(k toml.Key) string {
	if line := keyLine(l.text, k); line > 0 {
		return fmt.Sprintf("%s:%d: %s", l.path, line, k)
	}
	return fmt.Sprintf("%s: %s", l.path, k)
}

func (l configLoader) errorf(k toml.Key, format string, args ...any) error {
	return fmt.Errorf("%s: %s", l.where(k), fmt.Sprintf(format, args...))
}

func (l configLoader) entries(table map[string]any, prefix toml.Key, profile bool) ([]entry, error) {
	var out []entry
	for _, name := range sortedMapKeys(table) {
		v := table[name]
		k := append(slices.Clone(prefix), name)
		if name == "profiles" && !profile {
			continue
		}
		def, ok := lookupKey(name)
		if !ok || def.name == "fs-root" || def.name == "config" {
			msg := "unknown key"
			if alt := strings.ReplaceAll(name, "_", "-"); alt != name {
				if _, ok := lookupKey(alt); ok {
					msg += fmt.Sprintf("; did you mean %s?", alt)
				}
			}
			return nil, l.errorf(k, "%s", msg)
		}
		if profile && !def.inProfile {
			return nil, l.errorf(k, "a profile may only add restrictions and allowlist entries; %s cannot be set in a profile", def.name)
		}
		e := entry{key: def.name, where: l.where(k)}
		switch def.kind {
		case kindBool:
			b, ok := v.(bool)
			if !ok {
				return nil, l.errorf(k, "want true or false, not %s", tomlType(v))
			}
			e.b = b
		case kindString:
			s, ok := v.(string)
			if !ok {
				return nil, l.errorf(k, "want a string, not %s", tomlType(v))
			}
			e.s = s
		case kindList:
			list, err := stringList(v)
			if err != nil {
				return nil, l.errorf(k, "%v", err)
			}
			e.list = list
		case kindFS:
			switch x := v.(type) {
			case bool:
				e.b = x
			case string:
				if profile {
					return nil, l.errorf(k, "a profile sets fs-readonly = true; give the root with --fs-readonly=ROOT or HERMETIC_FS_ROOT")
				}
				root := entry{key: "fs-root", s: x, where: e.where}
				if err := root.check(l.dir); err != nil {
					return nil, err
				}
				out = append(out, root)
				e.b = true
			default:
				return nil, l.errorf(k, "want true, false or a root directory, not %s", tomlType(v))
			}
		}
		if profile {
			switch {
			case def.kind == kindBool || def.kind == kindFS:
				if !e.b {
					return nil, l.errorf(k, "a profile may only add restrictions; %s = false would remove one", def.name)
				}
			case def.name == "network" && e.s == "open":
				return nil, l.errorf(k, "a profile may only add restrictions; network = \"open\" would widen the posture")
			}
		}
		if err := e.check(l.dir); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for i, item := range x {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: want a string, not %s", i+1, tomlType(item))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of strings, not %s", tomlType(v))
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	}
	return fmt.Sprintf("%T", v)
}

func sortedMapKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// keyMarker is decoded in place of the value of the key keyLine looks for;
// its error makes the TOML decoder report that key's position.
type keyMarker struct{}

var errKeyMarker = errors.New("key marker")

func (*keyMarker) UnmarshalTOML(any) error { return errKeyMarker }

// keyLine returns the line where key is defined in text, or 0. The TOML
// package reports key positions only in its errors, so it decodes text into
// a struct type built for that one key whose value always fails to decode.
func keyLine(text string, k toml.Key) int {
	t := reflect.TypeOf(keyMarker{})
	for i := len(k) - 1; i >= 0; i-- {
		if strings.ContainsAny(k[i], ",\"`") {
			return 0
		}
		t = reflect.StructOf([]reflect.StructField{{
			Name: "F",
			Type: t,
			Tag:  reflect.StructTag("toml:" + strconv.Quote(k[i])),
		}})
	}
	_, err := toml.Decode(text, reflect.New(t).Interface())
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Message == errKeyMarker.Error() {
		return pe.Position.Line
	}
	return 0
}
