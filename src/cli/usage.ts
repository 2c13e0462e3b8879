/**
 * The `corral` commands: one-line summaries for `corral --help` and the full text of each
 * `corral CMD --help` (printed on stdout, exit 0). The dispatcher answers --help from this table
 * without loading the command's module.
 */

const API_OPTIONS = `  --api URL        the corral API (default: $CORRAL_API_URL, else http://$CORRAL_API_HOST:$CORRAL_API_PORT)
  --token T        bearer token for the API (default: $CORRAL_API_TOKEN)`;

export interface CommandHelp {
  summary: string;
  usage: string;
}

export const HELP: Record<string, CommandHelp> = {
  serve: {
    summary: 'run the REST API and a worker in one process',
    usage: `usage: corral serve

Runs the REST API and a worker in the foreground until SIGINT/SIGTERM. Configured with environment
variables (see the README's Configuration section), not flags.
`,
  },
  api: {
    summary: 'run the REST API only',
    usage: `usage: corral api

Runs the REST API only (no worker) until SIGINT/SIGTERM. Configured with environment variables.
`,
  },
  worker: {
    summary: 'run a worker only',
    usage: `usage: corral worker

Runs a worker only (no API) until SIGINT/SIGTERM. Configured with environment variables.
`,
  },
  demo: {
    summary: 'start a local stack, submit the example task, follow it, print the report',
    usage: `usage: corral demo

Starts Redis (a container, unless REDIS_URL answers) and \`corral serve\`, submits
examples/fix-median.task.json, follows it, prints the report's path and the final answer, and stops
what it started. Without OPENAI_API_KEY it replays examples/fix-median.replay.json.
`,
  },
  submit: {
    summary: 'submit a task (TASK.md or SPEC.json) to the API; --watch follows it',
    usage: `usage: corral submit (TASK.md | SPEC.json | --task TEXT | --template NAME) [options]

Submits a run and prints its id. A .json file is a whole RunSpec; any other file is the task text
(Markdown with # Task, # Allowed tools, # Cannot do, # Done means sections, or plain text).
Options override what SPEC.json says. --template NAME runs one of the server's templates
(\`corral templates\` lists them) with its parameters given by --set.

  --dry-run            check everything the server checks and print the plan it resolved (tools,
                       each done check, the environment and its setup, egress, limits, budgets,
                       policy, model, the workspace: upload id, git remote); nothing is queued, no
                       model is called, no workspace is uploaded. Exit 0 when it would be
                       accepted, 1 with the reasons
  --template NAME      a server template instead of a task file (only --set, --workspace, --dry-run
                       and --watch apply: the template sets the rest of the spec)
  --set K=V            a template parameter (repeatable)

  --workspace DIR      DIR as the run's workspace: regular files, directories and symbolic links
                       that stay inside DIR (node_modules/.bin works); links that leave DIR and
                       special files are skipped with a warning naming each; .git is included
                       unless excluded. Up to 2 MiB of tar it goes inline in the spec; larger, its
                       id (the SHA-256 of its tar) is computed first and the server asked: a
                       directory it keeps already is not sent again; otherwise it is streamed to
                       PUT /v1/workspaces (up to the server's CORRAL_MAX_WORKSPACE_MB). With
                       --dry-run nothing is uploaded
  --exclude PATTERN    leave out matching paths (repeatable): a name or glob such as node_modules,
                       .git or *.log matches at any depth; a pattern with "/" (build/*.o) is
                       matched against the whole path from DIR
  --git URL            the workspace is a git remote the worker clones (one of the server's
                       CORRAL_GIT_REMOTES); --ref R a branch, tag or commit (default: its HEAD),
                       --depth N history fetched (default 1), --bundle: the agent's commits come
                       back as agent.bundle (corral artifacts RUN bundle -o FILE)
  --patch-exclude PAT  a gitignore pattern the patch leaves out, besides the workspace's own
                       .gitignore (repeatable; "!PAT" brings a path back)
  --allow-domain D     let the sandbox reach host D (repeatable; "*.example.org" for subdomains)
  --approvals          calls the policy cannot settle wait for \`corral approve\` (default: refused)
  --policy NAME        the server's policy to use (default: default)
  --environment NAME   the sandbox's environment (image, setup phase, cache) from the server's
                       catalogue (GET /v1/environments), e.g. node (default: default)
  --budget K=V,...     budgets: llmCalls, toolCalls, tokens, wallTimeS, costUsd (repeatable)
  --model NAME         one model for every turn (default: the server's CORRAL_MODEL or routing)
  --route S,C[,on=R+R] model routing: turns go to the strong model S when a rule holds (default
                       rules: first-turn, after-failed-check, after-failed-tool, after-blocked-call,
                       after-malformed-call, after-sub-run; also after-compaction), else to C
  --watch              follow the run until it ends (see \`corral watch --help\`)
  --no-watch           print the run id and return (the default)
${API_OPTIONS}

Exit status: 0 when submitted (with --watch: when the run succeeded), 1 when the API refused it or
the watched run did not succeed, 2 for bad usage.

examples:
  corral submit fix-tests.md --workspace . --exclude node_modules --watch
  corral submit examples/fix-median.task.json --budget llmCalls=10,costUsd=0.2
  id=$(corral submit task.md --workspace repo) && corral watch "$id"
  corral submit task.md --allow-domain pypi.org --dry-run
  corral submit --template fix-failing-tests --set testCommand='python3 -m pytest -q' --workspace .
`,
  },
  watch: {
    summary: 'follow a run live: steps, tool calls, decisions, budget bars, approvals',
    usage: `usage: corral watch RUN [--plain] [--api URL] [--token T]

Follows a run's events until it ends (a finished run is shown from its history): each step's tool
and arguments, the policy decision (allowed / BLOCKED and why), the result, budget bars, and for a
call waiting on a human the exact \`corral approve\` command. Ends with the status, the reason, the
report's path and the final answer. On a terminal the budget bars stay at the bottom and update in
place; otherwise (or with --plain) every line is printed once. A streamed model answer is shown
as it arrives (\`turn 3 ▸ …\`, control characters made visible); with model routing each turn names
its tier and model; delegate calls show the sub-runs they start. Ctrl-C stops watching, not the run.

${API_OPTIONS}

Exit status: 0 when the run succeeded, 1 when it ended otherwise (or the API failed), 2 for bad usage.
`,
  },
  approve: {
    summary: 'approve (or --deny) a pending tool call: corral approve RUN CALL [--deny]',
    usage: `usage: corral approve RUN CALL [--deny] [--note TEXT] [--api URL] [--token T]

Answers a tool call that waits for a human (\`corral watch\` prints the command to run). Who
answered is recorded as the token you authenticate with (tenant/token-name), not as text you type.
  --deny           refuse the call (default: approve it)
  --note TEXT      a note kept beside the answer in the log and the report (default: cli:$USER;
                   --by NAME is the older spelling)
${API_OPTIONS}
`,
  },
  cancel: {
    summary: 'cancel a queued or running run: corral cancel RUN [--wait]',
    usage: `usage: corral cancel RUN [--wait] [--api URL] [--token T]

Cancels a run: a queued run never starts; a running one is stopped and its sandbox removed.
  --wait           wait until the run has ended and print its final status
${API_OPTIONS}

Exit status: 0 when cancelled (or cancelling), 1 when the run had already ended or the API failed.
`,
  },
  verify: {
    summary: "check that a finished run's stored log is the one its worker wrote: corral verify RUN",
    usage: `usage: corral verify RUN [--json] [--api URL] [--token T]
       corral verify --log FILE [--final-hash HASH --lines N]

Recomputes the hash chain of a finished run's stored events.jsonl (through the API: the object
store's copy or the data dir's) and checks it against the run record's seal: the first line starts
from the run's spec, every line links to the one before, the last line's hash and the line count are
the ones the worker recorded, and the seal's Ed25519 signature is valid (when the operator signs
logs). Names the first line that differs: a changed byte, a removed, inserted or moved line, a cut tail.
  --json           print the API's answer as JSON
  --log FILE       check a log file offline (its chain; its end against --final-hash and --lines,
                   taken from the run record's logSeal or the report's Audit section)
${API_OPTIONS}

Exit status: 0 when verified, 1 when not (or the API failed).
`,
  },
  report: {
    summary: "print a finished run's markdown report: corral report RUN",
    usage: `usage: corral report RUN [--output FILE] [--api URL] [--token T]

Prints the run's report (markdown) from GET /v1/runs/RUN/report.
  -o, --output FILE   write it to FILE instead of stdout
${API_OPTIONS}
`,
  },
  artifacts: {
    summary: "a run's files (patch, tar, bundle, log, report): corral artifacts RUN [KIND] [-o FILE]",
    usage: `usage: corral artifacts RUN [patch|tar|bundle|log|report] [-o FILE] [--api URL] [--token T]
       corral artifacts migrate [--dry-run] [--remove]

Without KIND: lists the run's files, their sizes and the command that fetches each. With KIND:
streams that file from the API to FILE (written under a temporary name, renamed when complete), or
to stdout (patch, log and report; on a terminal with control characters shown as escapes).
  patch    workspace.patch: git apply it to the original tree
  tar      workspace.tar: the workspace as the run left it
  bundle   agent.bundle: the agent's commits (workspace.git with "bundle": true)
  log      events.jsonl: every event of the run
  report   report.md
  -o, --output FILE   write to FILE

migrate (an operator's command, on each worker host, with the service's configuration): after
CORRAL_ARTIFACTS was switched to an object store, puts the files of runs this host kept in
CORRAL_DATA_DIR/runs into the store under their tenants' keys (a file already there is skipped).
  --dry-run           list what would be stored
  --remove            delete this host's copy of each run once all its files are stored
${API_OPTIONS}
`,
  },
  replay: {
    summary: 're-run a finished run with its recorded model turns: corral replay RUN',
    usage: `usage: corral replay RUN [--api URL] [--token T]

Re-runs a finished run in a fresh sandbox with the model turns recorded in its log (no model is
called; the policy gate decides afresh) and follows it like \`corral watch\`.
${API_OPTIONS}
`,
  },
  'docker-gate': {
    summary: 'docker-gate --listen unix:///PATH/gate.sock: the only holder of the Docker socket; serves the checked API subset workers use',
    usage: `usage: corral docker-gate --listen unix:///PATH/gate.sock [--image IMAGE]... [--key-file FILE] [--socket-mode 0660]

Holds the Docker engine's socket (DOCKER_HOST, or /var/run/docker.sock) and serves on --listen only
the Engine API subset corral's workers use, each request checked: containers/create only for a
sandbox as src/sandbox/container-spec.ts builds it (image allowlist, no privileges or capabilities,
our seccomp profile, read-only root, no network, no host namespaces or devices, binds only under
CORRAL_EGRESS_DIR, size-capped tmpfs, limits within CORRAL_MAX_*, runtime runc or
CORRAL_GVISOR_RUNTIME, this deployment's labels); every other operation only on containers it created
for this deployment (CORRAL_QUEUE). Anything else is a 403 naming the rule, and logged.
--image       a sandbox image the gate allows (repeatable; default CORRAL_SANDBOX_IMAGE)
--key-file    the key of the ownership label (≥ 16 bytes); keep it to recognise sandboxes across restarts
--socket-mode the listen socket's mode (default 0660)
Point workers at it with DOCKER_HOST=unix:///PATH/gate.sock.
`,
  },
  sandbox: {
    summary: 'sandbox exec [--allow-domain D]... [--timeout-s N] [--memory-mb M] [--isolation runc|gvisor] -- CMD [ARGS...]',
    usage: `usage: corral sandbox exec [--allow-domain D]... [--timeout-s N] [--memory-mb M] [--isolation runc|gvisor] -- CMD [ARGS...]

Runs one command in a fresh sandbox (the production container spec) and prints the result as JSON.
--isolation picks the class (default: CORRAL_SANDBOX_RUNTIME). Exit 1 when the sandbox itself failed;
when it died during the command (out of memory under gVisor), the JSON says so (sandboxDied, oomKilled).
`,
  },
  templates: {
    summary: 'list the server\'s run templates and their parameters',
    usage: `usage: corral templates [--json] [--api URL] [--token T]

Lists the run templates the server loaded (its CORRAL_TEMPLATES_DIR): each one's description, its
parameters with their defaults, and an example \`corral submit --template\` line. --json prints the
API's answer (GET /v1/templates) as it is.
`,
  },
  environments: {
    summary: 'list the server\'s environments (image, setup phase, cache) a run may name',
    usage: `usage: corral environments [--json] [--api URL] [--token T]

Lists the environments the server loaded (its CORRAL_ENVIRONMENT_DIR, plus the built-in default):
each one's image, setup commands, where setup may connect, what keys its cache and the agent's
default egress. Name one with \`corral submit --environment NAME\`. --json prints GET /v1/environments.
`,
  },
  schedules: {
    summary: 'schedules list|add|rm: run a template on a cron pattern, unattended',
    usage: `usage:
  corral schedules [list] [--json]
  corral schedules add --cron PATTERN --template NAME [--set K=V]... [--timezone TZ] [--name TEXT] [--json]
  corral schedules rm ID
(each with [--api URL] [--token T])

A schedule submits a run of one of the server's templates (\`corral templates\`) each time its cron
pattern fires ("m h dom mon dow", read in --timezone, default UTC), unattended: calls the policy would
ask about are refused. Its runs are labelled schedule: ID. The server checks the pattern, the template
and the rendered run when you add it; a firing the tenant's limits refuse makes no run and is shown by
\`list\`. Schedules live in Redis and survive restarts.

examples:
  corral schedules add --cron "0 6 * * 1" --template dependency-report --set packageDir=services/api
  corral schedules list
`,
  },
  policy: {
    summary: 'policy check|eval: evaluate tool calls against a policy',
    usage: `usage:
  corral policy check [--policy FILE] --tool NAME --args JSON [--task TEXT] [--classifier]
  corral policy check --batch [--policy FILE] [--classifier]   (JSON lines {"id","tool","args","task"} on stdin)
  corral policy eval [--policy FILE] [--set FILE]
`,
  },
};

export function overview(): string {
  const lines = Object.entries(HELP).map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`);
  return `usage: corral <command> [options]      (corral <command> --help for its options)\n\ncommands:\n${lines.join('\n')}\n`;
}
