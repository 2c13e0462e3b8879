/** The kernel-surface attack suite (test/integration/suites/sandbox-kernel.ts) under runc. */
import { sandboxKernel } from './suites/sandbox-kernel';

sandboxKernel('runc');
