package spec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Keys accepted at each level of a spec.
var (
	topKeys     = []string{"name", "version", "description", "inputs", "defaults", "tasks", "outputs", "trigger"}
	inputKeys   = []string{"type", "required", "default", "description"}
	defaultKeys = []string{"retry", "timeout", "on_failure"}
	taskKeys    = []string{"description", "capability", "action", "with", "needs", "spread", "when", "on_failure", "retry", "timeout", "verify", "accept", "join", "loop", "on", "workflow", "wait"}
	joinKeys    = []string{"min", "cancel_rest"}
	loopKeys    = []string{"until", "over", "max", "every"}
)

// Name syntax.
var (
	workflowNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	// Task and input names appear in expressions (tasks.NAME.output,
	// inputs.NAME), so they must be CEL identifiers: no hyphens or dots.
	identRE      = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	outputNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,62}$`)
	capabilityRE = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$`)
	actionRE     = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
)

// celReserved are words CEL does not accept as field names, so they cannot
// name tasks or inputs.
var celReserved = []string{"as", "break", "const", "continue", "else", "false", "for", "function", "if",
	"import", "in", "let", "loop", "namespace", "null", "package", "return", "true", "var", "void", "while"}

// Input types by their spec name.
var inputTypes = map[string]robonetv1.ValueType{
	"any":    robonetv1.ValueType_VALUE_TYPE_ANY,
	"string": robonetv1.ValueType_VALUE_TYPE_STRING,
	"int":    robonetv1.ValueType_VALUE_TYPE_INT,
	"number": robonetv1.ValueType_VALUE_TYPE_NUMBER,
	"bool":   robonetv1.ValueType_VALUE_TYPE_BOOL,
	"list":   robonetv1.ValueType_VALUE_TYPE_LIST,
	"map":    robonetv1.ValueType_VALUE_TYPE_MAP,
}

// typeSynonyms maps type names from other languages to ours for "did you
// mean" hints.
var typeSynonyms = map[string]string{
	"float": "number", "double": "number", "integer": "int", "boolean": "bool",
	"array": "list", "object": "map", "dict": "map", "str": "string",
}

// compile runs the whole pipeline and returns the IR, or nil when a problem
// was found (the problems are in c.errs).
func (c *compiler) compile() *robonetv1.Workflow {
	root := c.resolve(c.parse())
	if root == nil {
		return nil
	}
	if isNull(root) {
		c.errorf(root, where{}, "a spec needs at least name, version and tasks", "spec is empty")
		return nil
	}
	entries, ok := c.mapping(root, where{}, "the top level of a spec")
	if !ok {
		return nil
	}
	top := c.checkKeys(entries, topKeys, where{}, "the spec")
	wf := &robonetv1.Workflow{}
	wf.Name = c.workflowName(root, top)
	wf.Version = c.version(root, top)
	if e, ok := top["description"]; ok {
		wf.Description, _ = c.str(e.value, where{field: "description"})
	}
	inputs := c.inputs(top)
	wf.Inputs = inputs
	if e, ok := top["trigger"]; ok {
		wf.Trigger = c.trigger(e, inputs)
	}
	defaults := policy{}
	if e, ok := top["defaults"]; ok {
		defaults = c.defaults(e)
	}
	tasks := c.tasks(root, top)
	if c.stopped {
		return nil
	}
	g := c.graph(tasks)
	declared := inputNames(inputs)
	for _, t := range tasks {
		if ir := c.buildTask(t, defaults, g, declared); ir != nil {
			wf.Tasks = append(wf.Tasks, ir)
		}
	}
	if e, ok := top["outputs"]; ok {
		wf.Outputs = c.outputs(e, g, declared)
	}
	if len(c.errs) > 0 || c.stopped {
		return nil
	}
	slices.SortFunc(wf.Tasks, func(a, b *robonetv1.Task) int { return strings.Compare(a.Name, b.Name) })
	return wf
}

// workflowName reads and checks the required `name`.
func (c *compiler) workflowName(root *yaml.Node, top map[string]entry) string {
	e, ok := top["name"]
	if !ok {
		c.errorf(root, where{field: "name"}, "add e.g. name: scan-and-summarize", "missing required field \"name\"")
		return ""
	}
	w := where{field: "name"}
	name, ok := c.str(e.value, w)
	if ok && !workflowNameRE.MatchString(name) {
		c.errorf(c.resolve(e.value), w, "use 1 to 63 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
			"invalid workflow name %q", name)
	}
	return name
}

// version reads and checks the required positive integer `version`.
func (c *compiler) version(root *yaml.Node, top map[string]entry) uint32 {
	w := where{field: "version"}
	e, ok := top["version"]
	if !ok {
		c.errorf(root, w, "add e.g. version: 1", "missing required field \"version\"")
		return 0
	}
	n := c.resolve(e.value)
	if n == nil {
		return 0
	}
	const hint = "versions are whole numbers from 1 up, e.g. version: 2"
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		c.errorf(n, w, hint, "version must be a positive integer, not %s", describe(n))
		return 0
	}
	v, ok := intValue(n)
	if !ok || v < 1 || v > math.MaxUint32 {
		c.errorf(n, w, hint, "version must be between 1 and %d, not %s", uint32(math.MaxUint32), n.Value)
		return 0
	}
	return uint32(v)
}

// intValue decodes an !!int scalar (decimal, 0x, 0o, ...).
func intValue(n *yaml.Node) (int64, bool) {
	var v int64
	if err := n.Decode(&v); err != nil {
		return 0, false
	}
	return v, true
}

// inputs reads the `inputs` mapping.
func (c *compiler) inputs(top map[string]entry) []*robonetv1.Input {
	e, ok := top["inputs"]
	if !ok {
		return nil
	}
	n := c.resolve(e.value)
	if n == nil || isNull(n) {
		return nil
	}
	entries, ok := c.mapping(n, where{field: "inputs"}, "inputs")
	if !ok {
		return nil
	}
	var out []*robonetv1.Input
	for _, in := range entries {
		if ir := c.input(in); ir != nil {
			out = append(out, ir)
		}
	}
	slices.SortFunc(out, func(a, b *robonetv1.Input) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// input reads one input declaration: {type, required, default, description}.
func (c *compiler) input(e entry) *robonetv1.Input {
	w := where{field: "inputs." + e.key}
	c.checkIdent(e.keyN, e.key, w, "input", "inputs."+e.key)
	ir := &robonetv1.Input{Name: e.key, Type: robonetv1.ValueType_VALUE_TYPE_ANY}
	n := c.resolve(e.value)
	if n == nil || isNull(n) {
		ir.Required = true
		return ir
	}
	entries, ok := c.mapping(n, w, "an input declaration")
	if !ok {
		return ir
	}
	fields := c.checkKeys(entries, inputKeys, w, "an input declaration")
	if f, ok := fields["description"]; ok {
		ir.Description, _ = c.str(f.value, w.child("description"))
	}
	typeName := "any"
	if f, ok := fields["type"]; ok {
		ir.Type, typeName = c.inputType(f, w.child("type"))
	}
	def, hasDefault := fields["default"]
	if hasDefault {
		if v, ok := c.plainValue(def.value, w.child("default"), 1); ok {
			if !typeAccepts(ir.Type, v) {
				c.errorf(c.resolve(def.value), w.child("default"), fmt.Sprintf("give a default of type %s, or change the type", typeName),
					"default is %s but the input type is %s", value.TypeName(v), typeName)
			}
			ir.DefaultJson = value.MustEncode(v)
		}
	}
	ir.Required = !hasDefault
	if f, ok := fields["required"]; ok {
		ir.Required = c.required(f, w.child("required"), hasDefault)
	}
	return ir
}

// inputType reads an input's `type`.
func (c *compiler) inputType(f entry, w where) (robonetv1.ValueType, string) {
	name, ok := c.str(f.value, w)
	if !ok {
		return robonetv1.ValueType_VALUE_TYPE_ANY, "any"
	}
	t, ok := inputTypes[name]
	if !ok {
		valid := make([]string, 0, len(inputTypes))
		for k := range inputTypes {
			valid = append(valid, k)
		}
		c.errorf(c.resolve(f.value), w, didYouMean(name, valid, typeSynonyms, "types"), "unknown type %q", name)
		return robonetv1.ValueType_VALUE_TYPE_ANY, "any"
	}
	return t, name
}

// required reads an input's `required` flag.
func (c *compiler) required(f entry, w where, hasDefault bool) bool {
	n := c.resolve(f.value)
	if n == nil {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		c.errorf(n, w, "write required: true or required: false", "required must be true or false, not %s", describe(n))
		return !hasDefault
	}
	req := n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
	if req && hasDefault {
		c.errorf(n, w, "remove required: true, or remove the default",
			"an input with a default is never required")
		return false
	}
	return req
}

// typeAccepts reports whether a canonical value fits a declared input type.
func typeAccepts(t robonetv1.ValueType, v any) bool {
	switch t {
	case robonetv1.ValueType_VALUE_TYPE_STRING:
		_, ok := v.(string)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_INT:
		_, ok := v.(int64)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_NUMBER:
		switch v.(type) {
		case int64, float64:
			return true
		}
		return false
	case robonetv1.ValueType_VALUE_TYPE_BOOL:
		_, ok := v.(bool)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_LIST:
		_, ok := v.([]any)
		return ok
	case robonetv1.ValueType_VALUE_TYPE_MAP:
		_, ok := v.(map[string]any)
		return ok
	}
	return true
}

func inputNames(inputs []*robonetv1.Input) []string {
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = in.Name
	}
	return names
}

// checkIdent reports a task or input name that cannot be used in
// expressions. ref is how expressions read it, e.g. "tasks.fetch.output".
func (c *compiler) checkIdent(n *yaml.Node, name string, w where, what, ref string) bool {
	if contains(celReserved, name) {
		c.errorf(n, w, "choose another name", "%q is a reserved word in expressions and cannot name a%s %s",
			name, article(what), what)
		return false
	}
	if identRE.MatchString(name) {
		return true
	}
	hint := fmt.Sprintf("%s names are read in expressions as %s, so use 1 to 63 characters: lowercase letters, digits and _, not starting with a digit", what, ref)
	if fixed := strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(name)); identRE.MatchString(fixed) && !contains(celReserved, fixed) {
		hint += fmt.Sprintf(", e.g. %q", fixed)
	}
	c.errorf(n, w, hint, "invalid %s name %q", what, name)
	return false
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "n"
	}
	return ""
}

// outputs reads the `outputs` mapping: name -> template.
func (c *compiler) outputs(e entry, g *graph, inputs []string) []*robonetv1.Output {
	n := c.resolve(e.value)
	if n == nil || isNull(n) {
		return nil
	}
	entries, ok := c.mapping(n, where{field: "outputs"}, "outputs")
	if !ok {
		return nil
	}
	var out []*robonetv1.Output
	for _, o := range entries {
		w := where{field: "outputs." + o.key}
		if !outputNameRE.MatchString(o.key) {
			c.errorf(o.keyN, w, "use 1 to 63 characters: lowercase letters, digits, _ and -, not starting with a digit or -",
				"invalid output name %q", o.key)
		}
		sc := &scope{field: w.field, graph: g, inputs: inputs, anyTask: true}
		out = append(out, &robonetv1.Output{Name: o.key, Value: c.template(o.value, sc)})
	}
	slices.SortFunc(out, func(a, b *robonetv1.Output) int { return strings.Compare(a.Name, b.Name) })
	return out
}
