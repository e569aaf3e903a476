package topics

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"relay/internal/config"
)

// Grant is one ACL a command needs, as `relay topics acls` prints it.
type Grant struct {
	For string `json:"command"`
	ACL
}

// Grants lists the ACLs each of commands needs with cfg (every command of
// Commands when none is named). Without the instance's transactional id
// in the environment (withID false), its ACL names the variable instead.
func Grants(cfg *config.Config, commands []string, withID bool) ([]Grant, error) {
	if len(commands) == 0 {
		commands = Commands
	}
	var out []Grant
	for _, cmd := range commands {
		list, err := ACLs(cfg, cmd)
		if err != nil {
			return nil, err
		}
		for _, acl := range list {
			if acl.Resource == "TransactionalId" && !acl.Prefixed && !withID {
				acl.Name = "$" + config.EnvTransactionalID // say what goes there
			}
			out = append(out, Grant{cmd, acl})
		}
	}
	return out, nil
}

// WriteGrantCommands writes the kafka-acls.sh commands granting gs to
// principal (User:<name>), each once.
func WriteGrantCommands(w io.Writer, gs []Grant, principal string) error {
	if !strings.HasPrefix(principal, "User:") {
		return fmt.Errorf("--principal %q: a principal is User:<name>", principal)
	}
	seen := map[string]bool{}
	for _, g := range gs {
		if line := g.Command(principal); !seen[line] {
			seen[line] = true
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

// WriteGrants writes gs as a table.
func WriteGrants(w io.Writer, gs []Grant) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMAND\tRESOURCE\tPATTERN\tNAME\tOPERATION\tWHY")
	for _, g := range gs {
		pattern := "literal"
		if g.Prefixed {
			pattern = "prefixed"
		}
		why := g.Why
		if g.Optional {
			why = "optional: " + why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.For, g.Resource, pattern, g.Name, g.Operation, why)
	}
	_ = tw.Flush()
}
