/**
 * Issue 38's attacks, one attacking tenant and one victim tenant, against `corral api` and
 * `corral worker` as separate processes: test/support/tenant-isolation-suite.ts.
 */
import { authOffSuite, tenantIsolationSuite } from '../support/tenant-isolation-suite';

jest.setTimeout(300_000);

describe('corral api + corral worker, two tenants', () => tenantIsolationSuite('split'));
describe('corral api + corral worker, auth off', () => authOffSuite('split'));
