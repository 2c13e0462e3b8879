/** The kernel-surface attack suite (test/integration/suites/sandbox-kernel.ts) under gvisor. */
import { sandboxKernel } from './suites/sandbox-kernel';

sandboxKernel('gvisor');
