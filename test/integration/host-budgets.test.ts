/** The host's shared kernel budgets (test/integration/suites/host-budgets.ts) under runc. */
import { hostBudgets } from './suites/host-budgets';

hostBudgets('runc');
