// ESLint 10 flat config: typescript-eslint's type-checked recommendations on every TypeScript file,
// Prettier for layout (eslint-config-prettier switches off the rules that would fight it).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/',
      '.build/',
      'coverage/',
      'reports/',
      '.stryker-tmp/',
      'node_modules/',
      'docs/api/',
      'docs/.vitepress/cache/',
      'docs/.vitepress/dist/',
      '**/*.js',
      '**/*.cjs',
      '**/*.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A store method is async to honour a Promise contract: even without an await, a throw in it
      // must reach the caller as a rejection, not as a synchronous exception.
      '@typescript-eslint/require-await': 'off',
      // A replay is thrown as a plain object on purpose: it is no failure, and must not pay for a stack.
      '@typescript-eslint/only-throw-error': [
        'error',
        { allow: [{ from: 'file', name: 'IdempotentReplay', path: 'lib/shared/exceptions/idempotent-replay.exception.ts' }] },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Tests read HTTP bodies (supertest types them `any`) and hand methods to `expect` unbound.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/unbound-method': 'off',
    },
  },
  prettier,
);
