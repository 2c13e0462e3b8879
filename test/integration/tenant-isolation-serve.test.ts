/**
 * Issue 38's attacks, one attacking tenant and one victim tenant, against one `corral serve` (the
 * supervisor with its API and worker children): test/support/tenant-isolation-suite.ts.
 */
import { authOffSuite, tenantIsolationSuite } from '../support/tenant-isolation-suite';

jest.setTimeout(300_000);

describe('corral serve, two tenants', () => tenantIsolationSuite('serve'));
describe('corral serve, auth off', () => authOffSuite('serve'));
