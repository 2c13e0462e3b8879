/**
 * The `corral` command. Each subcommand lives in its own file and exports `run(argv): Promise<number>`
 * (the exit code); this file only dispatches and turns uncaught errors into a message and exit 1.
 */
type Command = { summary: string; load: () => Promise<{ run(argv: string[]): Promise<number> }> };

const COMMANDS: Record<string, Command> = {
  serve: { summary: 'run the REST API and a worker in one process', load: () => import('./serve') },
  api: { summary: 'run the REST API only', load: () => import('./serve') },
  worker: { summary: 'run a worker only', load: () => import('./serve') },
  demo: { summary: 'start a local stack, submit the example task, follow it, print the report', load: () => import('./demo') },
  submit: { summary: 'submit a task to a running API and follow it', load: () => import('./submit') },
  replay: { summary: 're-run a finished run with its recorded model turns: corral replay RUN [--api URL]', load: () => import('./replay') },
  approve: { summary: 'approve (or --deny) a pending tool call: corral approve RUN CALL [--deny]', load: () => import('./approve') },
  sandbox: { summary: 'sandbox exec [--allow-domain D]... [--timeout-s N] [--memory-mb M] -- CMD [ARGS...]', load: () => import('./sandbox-exec') },
  policy: { summary: 'policy check|eval: evaluate tool calls against a policy', load: () => import('./policy') },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`);
  return `usage: corral <command> [options]\n\ncommands:\n${lines.join('\n')}\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '-h' || name === '--help') {
    process.stdout.write(usage());
    return name ? 0 : 2;
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    process.stderr.write(`corral: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  const mod = await cmd.load();
  return mod.run(name === 'api' || name === 'worker' || name === 'serve' ? [name, ...rest] : rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const e = err as { code?: string; message?: string };
    process.stderr.write(`corral: ${e.code ? `[${e.code}] ` : ''}${e.message ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
