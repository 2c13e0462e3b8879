/**
 * The catalogue of command specs, by name. A command without a spec is not understood: the policy
 * may still deny it by name, but can never give it a final allow.
 */
import type { CommandSpec } from './command-spec';
import { BUILD_TOOL_SPECS } from './build-tools';
import { FILE_TOOL_SPECS } from './file-tools';
import { GIT_SPECS } from './git';
import { GO_RUST_SPECS } from './go-rust';
import { NET_TOOL_SPECS } from './net-tools';
import { NODE_SPECS } from './node';
import { PROCESS_TOOL_SPECS } from './process-tools';
import { PYTHON_SPECS } from './python';
import { SHELL_BUILTIN_SPECS } from './shell-builtins';
import { TEXT_TOOL_SPECS } from './text-tools';

const BY_NAME = new Map<string, CommandSpec>();
for (const s of [...FILE_TOOL_SPECS, ...TEXT_TOOL_SPECS, ...SHELL_BUILTIN_SPECS, ...PYTHON_SPECS, ...NODE_SPECS, ...GO_RUST_SPECS, ...BUILD_TOOL_SPECS, ...GIT_SPECS, ...NET_TOOL_SPECS, ...PROCESS_TOOL_SPECS]) {
  for (const n of s.names) {
    if (BY_NAME.has(n)) throw new Error(`two command specs for "${n}"`);
    BY_NAME.set(n, s);
  }
}

export function findSpec(name: string): CommandSpec | undefined {
  return BY_NAME.get(name);
}

export function specNames(): string[] {
  return [...BY_NAME.keys()];
}
