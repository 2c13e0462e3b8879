/** One run end to end (test/integration/suites/run-e2e.ts) under runc, with the API's input checks. */
import { runE2e } from './suites/run-e2e';

runE2e('runc', { inputChecks: true });
