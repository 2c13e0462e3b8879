/**
 * Makes Fastify's app.inject() loadable under Jest on Node 22: light-my-request require()s `cookie`
 * 2.x, which is ES-module only; Node 22 loads it natively, but Jest's module registry cannot (until
 * Node 24.9), and inject() fails before it sends anything. light-my-request uses one function of it,
 * stringifySetCookie, and only for inject({ cookies }), which these tests never pass — so `cookie`
 * is replaced by a stand-in that says so if it is ever called. Nothing the API does goes through it.
 * Import this file before the first inject(). (A jest.config transform of node_modules/cookie would
 * make this file unnecessary.)
 */
jest.mock('cookie', () => ({
  stringifySetCookie: () => {
    throw new Error('inject({ cookies }) is not supported in these tests (see test/support/inject-esm.ts)');
  },
}));
