package launcher

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// AddFlags defines hermetic's run flags on fs (SPEC §4, §6). The same
// definitions parse the command line and HERMETIC_FLAGS, so both accept
// exactly the same flags.
func AddFlags(fs *pflag.FlagSet) { addFlags(fs, false) }

// AddPolicyFlags defines only the flags that make up the network policy,
// with --profile and --config, for `hermetic check`.
func AddPolicyFlags(fs *pflag.FlagSet) { addFlags(fs, true) }

func addFlags(fs *pflag.FlagSet, policyOnly bool) {
	for _, k := range keys {
		if !k.flag || policyOnly && !k.policy {
			continue
		}
		switch k.kind {
		case kindBool:
			fs.Bool(k.name, false, k.usage)
		case kindString:
			fs.String(k.name, "", k.usage)
		case kindList:
			fs.StringArray(k.name, nil, k.usage)
		case kindFS:
			f := fs.VarPF(&fsValue{}, k.name, "", k.usage)
			f.NoOptDefVal = "true"
		}
	}
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if a, ok := keyAliases[name]; ok {
			name = a
		}
		return pflag.NormalizedName(name)
	})
}

// fsValue is --fs-readonly[=ROOT]: "true" or no value turns the guard on,
// "false" turns it off, anything else is the root (and turns it on).
type fsValue struct {
	on   bool
	root string
}

func (v *fsValue) String() string {
	switch {
	case v.root != "":
		return v.root
	case v.on:
		return "true"
	}
	return ""
}

func (v *fsValue) Set(s string) error {
	switch s {
	case "":
		return fmt.Errorf("empty root; use --fs-readonly or --fs-readonly=ROOT")
	case "true", "false":
		v.on, _ = strconv.ParseBool(s)
		v.root = ""
	default:
		v.on, v.root = true, s
	}
	return nil
}

// Type is "bool" so that --help shows the flag as a switch; its usage text
// explains the optional =ROOT.
func (v *fsValue) Type() string { return "bool" }

// flagEntries turns the flags set on fs into settings. source prefixes
// the flag in messages ("" for the command line, "HERMETIC_FLAGS"); dir
// resolves relative paths.
func flagEntries(fs *pflag.FlagSet, source, dir string) ([]entry, error) {
	var (
		out  []entry
		errs error
	)
	fs.Visit(func(f *pflag.Flag) {
		if errs != nil {
			return
		}
		k, ok := lookupKey(f.Name)
		if !ok || !k.flag {
			return // a flag the caller added for itself
		}
		where := "--" + k.name
		if source != "" {
			where = source + " " + where
		}
		var e entry
		switch k.kind {
		case kindBool:
			b, err := fs.GetBool(f.Name)
			if err != nil {
				errs = err
				return
			}
			e = entry{key: k.name, b: b}
		case kindString:
			s, err := fs.GetString(f.Name)
			if err != nil {
				errs = err
				return
			}
			e = entry{key: k.name, s: s}
		case kindList:
			l, err := fs.GetStringArray(f.Name)
			if err != nil {
				errs = err
				return
			}
			e = entry{key: k.name, list: l}
		case kindFS:
			v := f.Value.(*fsValue)
			e = entry{key: k.name, b: v.on}
			if v.root != "" {
				root := entry{key: "fs-root", s: v.root, where: where}
				if err := root.check(dir); err != nil {
					errs = err
					return
				}
				out = append(out, root)
			}
		}
		e.where = where
		if err := e.check(dir); err != nil {
			errs = err
			return
		}
		out = append(out, e)
	})
	return out, errs
}
