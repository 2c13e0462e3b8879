/** The hostile-sandbox egress suite (test/integration/suites/egress-hostile.ts) under runc, with the worker-side cases. */
import { egressHostile } from './suites/egress-hostile';

egressHostile('runc', { workerSide: true });
