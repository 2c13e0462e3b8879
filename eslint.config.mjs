import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', '.ci/state/**', 'jest.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-properties': ['error', { object: 'process', property: 'exit', message: 'only src/main.ts and bin/ may exit' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/config.ts'],
    rules: { 'no-restricted-properties': ['error',
      { object: 'process', property: 'env', message: 'read configuration through src/config.ts' },
      { object: 'process', property: 'exit', message: 'only src/main.ts may exit' }] },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/sandbox/**'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'dockerode', message: 'only src/sandbox/ talks to Docker' }] }] },
  },
  {
    files: ['src/run/**/*.ts', 'src/tools/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: ['dockerode', 'openai', 'bullmq', 'ioredis'] }] },
  },
  { files: ['src/main.ts', 'src/cli/**/*.ts', 'bench/**/*.ts', 'test/**/*.ts'], rules: { 'no-restricted-properties': 'off' } },
);
