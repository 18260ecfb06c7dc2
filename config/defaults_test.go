package config

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDefaultsThroughLoad: Defaults is the one list of defaults, and every
// one of them arrives through the real load path (no file, no env), with
// nothing lost or added on the way; a list a file or env sets replaces the
// default's whole, longer or shorter.
func TestDefaultsThroughLoad(t *testing.T) {
	got, err := Load(t.TempDir(), []string{"LAZY_HOME=/x"})
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	if !reflect.DeepEqual(*got, want) {
		for _, k := range leafKeys(reflect.TypeOf(want), nil) {
			g, _ := lookup(reflect.ValueOf(*got), k)
			w, _ := lookup(reflect.ValueOf(want), k)
			if !reflect.DeepEqual(g.Interface(), w.Interface()) {
				t.Errorf("%s: loaded %v, Defaults() says %v", strings.Join(k, "."), g.Interface(), w.Interface())
			}
		}
		t.Fatal("a default did not arrive through Load")
	}
	if reflect.DeepEqual(Defaults(), Config{}) {
		t.Fatal("Defaults() is empty")
	}

	root := writeConfig(t, `
[protect]
paths = []
[cluster]
etcd = ["10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"]
`)
	cfg, err := Load(root, []string{"LAZY_DAEMON__PORT_WINDOW=27000,27010"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Protect.Paths) != 0 {
		t.Errorf("protect.paths = []: got %v, want none", cfg.Protect.Paths)
	}
	if want := []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"}; !slices.Equal(cfg.Cluster.Etcd, want) {
		t.Errorf("cluster.etcd: got %v, want %v", cfg.Cluster.Etcd, want)
	}
	if want := []int{27000, 27010}; !slices.Equal(cfg.Daemon.PortWindow, want) {
		t.Errorf("daemon.port_window: got %v, want %v", cfg.Daemon.PortWindow, want)
	}
	if d := Defaults(); !slices.Equal(d.Protect.Paths, []string{".lazy/config.toml"}) || len(d.Cluster.Etcd) != 1 {
		t.Errorf("a load changed the defaults themselves: %v %v", d.Protect.Paths, d.Cluster.Etcd)
	}
}

// templateDiffers are the keys the init template sets to other than the
// default, on purpose.
var templateDiffers = map[string]string{
	"proxy.credential": "a project made by lazy init sends the real credential; a bare daemon sends none",
}

// TestTemplateKeysAreDefaults: every key the init template names, set or
// commented out, is a key of Config; every key it sets is set to the
// default (but templateDiffers) as Load reads it.
func TestTemplateKeysAreDefaults(t *testing.T) {
	section := regexp.MustCompile(`^#?\s*\[\[?([a-z_.]+)\]\]?`)
	key := regexp.MustCompile(`^(#?)\s*([a-z_]+)\s*=`)
	root := writeConfig(t, Template)
	loaded, err := Load(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := Defaults()
	var sec []string
	n := 0
	for _, line := range strings.Split(Template, "\n") {
		if m := section.FindStringSubmatch(line); m != nil {
			sec = strings.Split(m[1], ".")
			continue
		}
		m := key.FindStringSubmatch(line)
		if m == nil || sec == nil {
			continue
		}
		path := append(slices.Clone(sec), m[2])
		name := strings.Join(path, ".")
		if !known(reflect.TypeOf(def), path) {
			t.Errorf("the template names %s, which is no key of Config", name)
			continue
		}
		n++
		if m[1] == "#" || templateDiffers[name] != "" {
			continue
		}
		g, _ := lookup(reflect.ValueOf(*loaded), path)
		w, _ := lookup(reflect.ValueOf(def), path)
		if !reflect.DeepEqual(g.Interface(), w.Interface()) {
			t.Errorf("the template sets %s = %v, the default is %v: make them agree, or name it in templateDiffers", name, g.Interface(), w.Interface())
		}
	}
	if n < 20 {
		t.Fatalf("read %d keys from the template: the parse is wrong", n)
	}
}

// leafKeys lists the koanf paths of every field of t that is no struct.
func leafKeys(t reflect.Type, prefix []string) [][]string {
	var out [][]string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		p := append(slices.Clone(prefix), f.Tag.Get("koanf"))
		if f.Type.Kind() == reflect.Struct {
			out = append(out, leafKeys(f.Type, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// known reports whether path is a key of t: struct fields by their koanf
// tag, a map's any key, a list of tables' elements.
func known(t reflect.Type, path []string) bool {
	for _, p := range path {
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
			continue
		case reflect.Slice:
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		f, ok := fieldByTag(t, p)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// lookup is the value at path (struct fields only).
func lookup(v reflect.Value, path []string) (reflect.Value, bool) {
	for _, p := range path {
		f, ok := fieldByTag(v.Type(), p)
		if !ok {
			return reflect.Value{}, false
		}
		v = v.FieldByIndex(f.Index)
	}
	return v, true
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("koanf") == tag {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}
