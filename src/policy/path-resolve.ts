/**
 * Lexical path resolution for the gate: a path as a command would see it, from a working
 * directory, with `.` and `..` applied and no file system consulted (the gate runs on the host;
 * the sandbox's files are not there). `escapes` is set when the path leaves the workspace at any
 * step, even if it comes back (`../ws/x`), or when a glob segment could expand to `..`.
 */
import { segmentCouldBeDotDot } from './path-glob';

export interface ResolvedPath { abs: string; escapes: boolean }

export function resolveIn(workspace: string, raw: string, cwd: string): ResolvedPath {
  const start = raw.startsWith('/') ? '/' : cwd;
  const stack = start.split('/').filter(Boolean);
  const wsDepth = workspace.split('/').filter(Boolean).length;
  const insideNow = () => ('/' + stack.join('/') + '/').startsWith(workspace + '/');
  let escapes = false;
  for (const seg of raw.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..' || segmentCouldBeDotDot(seg)) {
      const wasInside = insideNow();
      stack.pop();
      if (wasInside && stack.length < wsDepth) escapes = true;
      if (seg !== '..') escapes = true;
      continue;
    }
    stack.push(seg);
  }
  return { abs: '/' + stack.join('/'), escapes };
}

export function resolvePathIn(workspace: string, raw: string, cwd: string): string {
  return resolveIn(workspace, raw, cwd).abs;
}

export function isInside(workspace: string, abs: string): boolean {
  return abs === workspace || abs.startsWith(workspace + '/');
}
