/** The sandbox attack suite (test/integration/suites/sandbox-attacks.ts) under runc. */
import { sandboxAttacks } from './suites/sandbox-attacks';

sandboxAttacks('runc');
