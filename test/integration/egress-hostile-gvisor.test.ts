/** The hostile-sandbox egress suite (test/integration/suites/egress-hostile.ts): its attacks from inside a gVisor sandbox. */
import { egressHostile } from './suites/egress-hostile';

egressHostile('gvisor', { workerSide: false });
