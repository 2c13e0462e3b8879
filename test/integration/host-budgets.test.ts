/**
 * The host's shared kernel budgets (test/integration/suites/host-budgets.ts), under runc and then
 * gVisor in one file: what they measure (fs.file-nr, kernel.pty.nr, fs.aio-nr) is the whole host's,
 * so the two classes must not run at the same time.
 */
import { hostBudgets } from './suites/host-budgets';

jest.setTimeout(240_000);

describe('runc', () => hostBudgets('runc'));
describe('gvisor', () => hostBudgets('gvisor'));
