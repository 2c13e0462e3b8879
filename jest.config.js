/** Unit tests use fakes of our own ports; integration tests use the real Docker daemon and Redis. */
const transform = {
  '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2023' } }],
  // cookie 2.x (used by Fastify's inject()) ships only ES modules, which Jest's CommonJS registry cannot load.
  '/node_modules/cookie/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2023' }, module: { type: 'commonjs' } }],
  // The OTLP exporters load node:http with import(), which Jest's VM refuses without
  // --experimental-vm-modules: compiled to require() for tests only (node runs the package as is).
  '/node_modules/@opentelemetry/otlp-exporter-base/.+\\.cjs$': ['@swc/jest', { jsc: { target: 'es2023' }, module: { type: 'commonjs' } }],
};
const transformIgnorePatterns = ['/node_modules/(?!cookie/|@opentelemetry/otlp-exporter-base/)'];
module.exports = {
  testEnvironment: 'node',
  maxWorkers: 2,
  // A bound on a test that hangs, not a speed check: a busy host makes tests slower, never red (files
  // that need longer set their own with jest.setTimeout).
  testTimeout: 60_000,
  projects: [
    { displayName: 'unit', testEnvironment: 'node', transform, transformIgnorePatterns, testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      displayName: 'integration', testEnvironment: 'node', transform, transformIgnorePatterns,
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
