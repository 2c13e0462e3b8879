/**
 * Kill one process of the sandbox and everything it started that is still below it, whatever it did
 * to its session or process group. Run as its own exec, as the agent's uid (like call-kill.ts):
 *   1. `kill -STOP -1` freezes every process the agent's uid may signal, so nothing forks meanwhile;
 *   2. the tree below the pid is collected from /proc/<pid>/stat parent links;
 *   3. all of it gets SIGKILL, then `kill -CONT -1` thaws the rest (other servers, the agent's own
 *      background processes keep running).
 * A descendant that double-forked to PID 1 has left the tree: it lives on until the sandbox's end.
 * Shell builtins only.
 */
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';

export function killTreeArgv(pid: number): string[] {
  const script = `me=$BASHPID
root=$1
kill -STOP -1 2>/dev/null
all=" $root "
grew=1
while [ $grew = 1 ]; do
  grew=0
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    [ "$p" = "$me" ] && continue
    case "$all" in *" $p "*) continue ;; esac
    read -r st < "$d/stat" 2>/dev/null || continue
    rest=\${st##*) }
    set -f; set -- $rest; set +f
    case "$all" in *" $2 "*) all="$all$p "; grew=1 ;; esac
  done
done
kill -KILL $all 2>/dev/null
kill -CONT -1 2>/dev/null
exit 0`;
  return ['bash', '-c', script, 'corral-kill-tree', String(pid)];
}

/** Runs the killer once; true when it ran to the end. */
export async function killTree(container: Docker.Container, user: string, pid: number): Promise<boolean> {
  try {
    const exec = await container.exec({ Cmd: killTreeArgv(pid), User: user, AttachStdout: true, AttachStderr: true, Tty: false, Privileged: false });
    const s = (await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })) as unknown as Readable;
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
