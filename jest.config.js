/** Unit tests use fakes of our own ports; integration tests use the real Docker daemon and Redis. */
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2023' } }] };
module.exports = {
  testEnvironment: 'node',
  maxWorkers: 2,
  projects: [
    { displayName: 'unit', testEnvironment: 'node', transform, testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      displayName: 'integration', testEnvironment: 'node', transform,
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
