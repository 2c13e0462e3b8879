/**
 * Kill what one call started, whatever it did to its environment or session. Run as its own exec,
 * as the agent's uid, after a call's timeout or cancel:
 *   1. `kill -STOP -1` freezes every process the agent's uid may signal (all of the sandbox's agent
 *      processes: PID 1 and the relay run as another uid) except this shell — one system call, so no
 *      fork can race it;
 *   2. every frozen process that started after the call began (its start time in /proc/<pid>/stat,
 *      against the uptime now minus the call's age) gets SIGKILL: children that left the process group
 *      (`setsid`), dropped their environment (`env -i`) or double-forked to PID 1 included;
 *   3. `kill -CONT -1` thaws the rest: background processes of earlier calls (a server the agent
 *      started on purpose) keep running.
 * Shell builtins only, so it needs exactly one process slot. One call runs at a time per sandbox, so
 * "started since the call began" is the call's, except for children an earlier call's process forked
 * meanwhile (they die too).
 */
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { EXEC_START } from './sandbox-engine';

/** Clock ticks per second of /proc/<pid>/stat start times (USER_HZ: 100 on every Linux ABI corral runs on). */
const USER_HZ = 100;
/** Start times and uptime are in 10 ms ticks: count a little earlier than the call's start. */
const MARGIN_MS = 250;

export function killCallArgv(callAgeMs: number): string[] {
  const ticks = Math.ceil(((callAgeMs + MARGIN_MS) * USER_HZ) / 1000);
  const script = `me=$BASHPID
kill -STOP -1 2>/dev/null
read -r up _ < /proc/uptime
now=\${up/./}; now=$((10#$now))
since=$((now - $1))
victims=
for d in /proc/[0-9]*; do
  p=\${d#/proc/}
  [ "$p" = "$me" ] && continue
  [ -O "$d" ] || continue
  read -r st < "$d/stat" 2>/dev/null || continue
  rest=\${st##*) }
  set -f; set -- $rest; set +f
  [ "\${20:-0}" -ge "$since" ] && victims="$victims $p"
done
[ -n "$victims" ] && kill -KILL $victims 2>/dev/null
kill -CONT -1 2>/dev/null
exit 0`;
  return ['bash', '-c', script, 'corral-kill', String(ticks)];
}

/**
 * Runs the killer once; true when it ran to the end (exit 0). False when it could not start — the
 * sandbox is at its pids limit or gone — or failed: the caller must then stop the whole sandbox.
 */
export async function killCall(container: Docker.Container, user: string, callAgeMs: number): Promise<boolean> {
  try {
    const exec = await container.exec({ Cmd: killCallArgv(callAgeMs), User: user, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await exec.start({ hijack: true, stdin: false, ...EXEC_START })) as unknown as Readable;
    s.resume();
    await new Promise<void>((resolve) => {
      s.once('end', () => resolve());
      s.once('close', () => resolve());
      s.once('error', () => resolve());
      setTimeout(() => { s.destroy(); resolve(); }, 10_000).unref();
    });
    return (await exec.inspect()).ExitCode === 0;
  } catch {
    return false;
  }
}
