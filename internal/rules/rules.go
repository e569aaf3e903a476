package rules

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"cel.dev/cel-go/cel"
	"go.yaml.in/yaml/v3"

	"relay/internal/tiers"
)

// Action is what a matching rule does with the record.
type Action string

const (
	ActionReject     Action = "reject"
	ActionQuarantine Action = "quarantine"
)

// maxCost bounds the evaluation of one rule on one record, so a rule over a
// large list cannot stall the transaction.
const maxCost = 100_000

// Rule is one compiled rule.
type Rule struct {
	Name   string
	Expr   string
	Action Action
	prg    cel.Program
}

// Set is an ordered list of rules; the first that matches decides.
type Set struct {
	rules []Rule
}

// file is the YAML shape of a rules file.
type file struct {
	Rules []fileRule `yaml:"rules"`
}

// fileRule is one rule as written in the file.
type fileRule struct {
	Name   string `yaml:"name"`
	Expr   string `yaml:"expr"`
	Action string `yaml:"action"`
}

var ruleName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,39}$`)

// Load reads and compiles a rules file. Every problem is reported, each with
// the file, the line, the rule name and, for expressions, CEL's position.
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules file: %w", err)
	}
	return Parse(path, data)
}

// Parse compiles rules from data; path names the file in errors.
func Parse(path string, data []byte) (*Set, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %w", path, err)
	}
	var f file
	if err := root.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lines := ruleLines(&root)
	env, err := cel.NewEnv(cel.Variable("record", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return nil, fmt.Errorf("rules: CEL environment: %w", err)
	}
	set := &Set{}
	var errs []error
	seen := map[string]bool{}
	for i, r := range f.Rules {
		where := fmt.Sprintf("%s:%d: rule %d", path, lineOf(lines, i), i+1)
		if r.Name != "" {
			where += " (" + r.Name + ")"
		}
		rule, err := compile(env, r, seen)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		set.rules = append(set.rules, rule)
	}
	if len(f.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%s: no rules (expected a top-level 'rules:' list)", path))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// compile checks one rule and compiles its expression; seen holds the
// names of the rules before it.
func compile(env *cel.Env, r fileRule, seen map[string]bool) (Rule, error) {
	switch {
	case !ruleName.MatchString(r.Name):
		return Rule{}, fmt.Errorf("name %q must be upper-snake (A-Z, 0-9, _), at most 40 characters: it becomes the code REJECTED_<NAME>", r.Name)
	case seen[r.Name]:
		return Rule{}, fmt.Errorf("name %s is used twice", r.Name)
	}
	seen[r.Name] = true
	action := Action(strings.ToLower(strings.TrimSpace(r.Action)))
	if action == "" {
		action = ActionReject
	}
	if action != ActionReject && action != ActionQuarantine {
		return Rule{}, fmt.Errorf("action %q is not reject or quarantine", r.Action)
	}
	if strings.TrimSpace(r.Expr) == "" {
		return Rule{}, errors.New("expr is empty")
	}
	ast, iss := env.Compile(r.Expr)
	if iss.Err() != nil {
		return Rule{}, fmt.Errorf("expr does not compile:\n%w", iss.Err())
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return Rule{}, fmt.Errorf("expr gives %s, a rule must give a bool", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(maxCost))
	if err != nil {
		return Rule{}, fmt.Errorf("expr: %w", err)
	}
	return Rule{Name: r.Name, Expr: r.Expr, Action: action, prg: prg}, nil
}

// ruleLines finds the line of each item of the top-level rules list.
func ruleLines(root *yaml.Node) []int {
	if len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "rules" {
			var out []int
			for _, item := range m.Content[i+1].Content {
				out = append(out, item.Line)
			}
			return out
		}
	}
	return nil
}

func lineOf(lines []int, i int) int {
	if i < len(lines) {
		return lines[i]
	}
	return 0
}

// Len is the number of rules.
func (s *Set) Len() int { return len(s.rules) }

// Names lists the rules in order.
func (s *Set) Names() []string {
	out := make([]string, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.Name
	}
	return out
}

// Check runs the rules on rec in order. The first rule that matches gives a
// *tiers.Error (reject or quarantine); nil means no rule matched. A rule that
// fails to evaluate (a missing key, a type mismatch at run time) is an
// unclassified failure naming the rule: the rule or the data needs a look.
func (s *Set) Check(_ context.Context, rec map[string]any) error {
	if s == nil {
		return nil
	}
	act := map[string]any{"record": rec}
	for _, r := range s.rules {
		out, _, err := r.prg.Eval(act)
		if err != nil {
			return fmt.Errorf("rule %s: %w", r.Name, err)
		}
		match, ok := out.Value().(bool)
		if !ok {
			return fmt.Errorf("rule %s gave %v, not a bool", r.Name, out.Value())
		}
		if !match {
			continue
		}
		c := tiers.CauseRuleReject
		if r.Action == ActionQuarantine {
			c = tiers.CauseRuleQuarantine
		}
		return &tiers.Error{Cause: c, Name: r.Name, Err: fmt.Errorf("rule %s matched: %s", r.Name, r.Expr)}
	}
	return nil
}
