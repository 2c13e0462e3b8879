import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', '.ci/state/**', 'jest.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Type-aware rules on the TypeScript (one program from tsconfig.json, which covers src, test and bench).
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise nobody awaits loses its error (an unhandled rejection ends the worker) and its ordering:
      // await it, return it, or hand it a .catch; `void` only for fire-and-forget whose errors are handled.
      '@typescript-eslint/no-floating-promises': 'error',
    },
  },
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
  { files: ['.dependency-cruiser.js'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable' } } },
  { files: ['src/main.ts', 'bench/**/*.ts', 'test/**/*.ts'], rules: { 'no-restricted-properties': 'off' } },
  {
    // The web console's script runs in the browser: its globals, and never markup from strings.
    files: ['src/console/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(['window', 'document', 'location', 'sessionStorage', 'fetch', 'setTimeout', 'setInterval', 'clearInterval', 'AbortController', 'TextDecoderStream', 'TextEncoder', 'Blob', 'performance', 'URL'].map((g) => [g, 'readonly'])),
    },
    rules: {
      'no-restricted-properties': ['error',
        { property: 'innerHTML', message: 'text only: use textContent' }, { property: 'outerHTML', message: 'text only' },
        { property: 'insertAdjacentHTML', message: 'text only' }, { object: 'document', property: 'write', message: 'text only' }],
      'no-restricted-globals': ['error', 'eval', 'localStorage'],
    },
  },
);
