/** The host's shared kernel budgets (test/integration/suites/host-budgets.ts) under gVisor. */
import { hostBudgets } from './suites/host-budgets';

hostBudgets('gvisor');
