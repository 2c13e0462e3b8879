/**
 * The `corral` command. Each subcommand lives in its own file and exports `run(argv): Promise<number>`
 * (the exit code). This file dispatches, answers `--help` for every command (usage.ts, on stdout,
 * exit 0), and turns errors into one line on stderr: bad usage → exit 2 with a pointer to --help;
 * an unreachable or refusing API, or any other failure → exit 1.
 */
import { wantsHelp } from './cli-args';
import { errorLine } from './error-line';
import { HELP, overview } from './usage';

type Loader = () => Promise<{ run(argv: string[]): Promise<number> }>;

const COMMANDS: Record<string, Loader> = {
  serve: () => import('./serve'),
  api: () => import('./serve'),
  worker: () => import('./serve'),
  demo: () => import('./demo'),
  submit: () => import('./submit'),
  watch: () => import('./watch'),
  approve: () => import('./approve'),
  cancel: () => import('./cancel'),
  report: () => import('./report'),
  verify: () => import('./verify'),
  artifacts: () => import('./artifacts'),
  replay: () => import('./replay'),
  sandbox: () => import('./sandbox-exec'),
  policy: () => import('./policy'),
  templates: () => import('./templates'),
  environments: () => import('./environments'),
  schedules: () => import('./schedules'),
  'docker-gate': () => import('./docker-gate'),
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '-h' || name === '--help' || name === 'help') {
    const topic = name === 'help' ? rest[0] : undefined;
    if (topic && HELP[topic]) {
      process.stdout.write(HELP[topic].usage);
      return 0;
    }
    process.stdout.write(overview());
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(`corral: unknown command "${name}"; run \`corral --help\` for the list\n`);
    return 2;
  }
  if (wantsHelp(rest)) {
    process.stdout.write(HELP[name]!.usage);
    return 0;
  }
  const mod = await load();
  return mod.run(name === 'api' || name === 'worker' || name === 'serve' ? [name, ...rest] : rest);
}

const args = process.argv.slice(2);
main(args).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const { line, code } = errorLine(args[0], err);
    process.stderr.write(`${line}\n`);
    process.exitCode = code;
  },
);
