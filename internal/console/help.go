package console

// Help is `relay console --help`'s long text: what the console shows, who
// may act, and how it stops.
const Help = `Serves the web console over the quarantine at RELAY_CONSOLE_ADDR
(127.0.0.1:9465 by default): per source, the unresolved failures by code
and state, the oldest, the retention headroom, the owner and alert
threshold, the replays and the last audit; the failures, filtered and paged;
one failure's envelope, headers, decoded payload (redacted) and ledger
history; and the actions — discard, replay dry run, sample, replay at a
rate with live progress and a stop button — each recorded in the ledger
with the actor and a reason, through the same code as relay quarantine and
relay replay.

Reading is open on loopback and needs a signed-in operator beyond it
(RELAY_CONSOLE_READ_AUTH: open or signed-in). Signing in, and acting,
need RELAY_CONSOLE_TOKEN (an operator signs in with it and their name),
or an authenticating proxy naming the user in RELAY_CONSOLE_USER_HEADER,
on RELAY_CONSOLE_PROXY_SOCKET (a sidecar) or from
RELAY_CONSOLE_TRUSTED_PROXIES. Without either the console is read-only,
and beyond loopback it shows nothing but its sign-in. Serve it to other
hosts only behind TLS (an ingress): it takes the token over TLS only.

Stops on SIGINT or SIGTERM; a replay in progress is interrupted as relay
replay is on Ctrl-C (what was published stays replaying; relay settles it).`
