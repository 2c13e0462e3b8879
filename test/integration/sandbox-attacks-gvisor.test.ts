/** The sandbox attack suite (test/integration/suites/sandbox-attacks.ts) under gvisor. */
import { sandboxAttacks } from './suites/sandbox-attacks';

sandboxAttacks('gvisor');
