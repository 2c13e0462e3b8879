/** One run end to end (test/integration/suites/run-e2e.ts) under gVisor. */
import { runE2e } from './suites/run-e2e';

runE2e('gvisor', { inputChecks: false });
